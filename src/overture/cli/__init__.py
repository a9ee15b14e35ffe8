"""Layer 6: the `overture` command line."""
