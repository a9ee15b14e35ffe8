"""Layer 7: recipes, end-to-end jobs built from the library. No library package imports one."""
