import pytest
from ledger import Coupon, Invoice, LineItem

# --- LineItem --------------------------------------------------------------


def test_line_item_amount_is_price_times_quantity():
    assert LineItem("Widget", 250, 4).amount() == 1000


def test_line_item_defaults_to_one_taxable_unit():
    item = LineItem("Widget", 250)
    assert item.quantity == 1
    assert item.taxable is True
    assert item.amount() == 250


def test_line_item_blank_description_raises():
    with pytest.raises(ValueError, match="needs a description"):
        LineItem("   ", 100)


def test_line_item_negative_price_raises():
    with pytest.raises(ValueError, match="unit price must not be negative"):
        LineItem("Widget", -1)


def test_line_item_zero_quantity_raises():
    with pytest.raises(ValueError, match="quantity must be positive"):
        LineItem("Widget", 100, 0)


def test_line_item_free_item_allowed():
    assert LineItem("Sample", 0, 3).amount() == 0


# --- building an invoice ---------------------------------------------------


def test_invoice_negative_tax_rate_raises():
    with pytest.raises(ValueError, match="tax rate must not be negative"):
        Invoice("INV-1", tax_rate_bp=-1)


def test_add_item_merges_same_description_and_price():
    invoice = Invoice("INV-1")
    first = invoice.add_item("Widget", 250, 2)
    second = invoice.add_item("Widget", 250, 3)
    assert second is first
    assert len(invoice.items) == 1
    assert invoice.items[0].quantity == 5


def test_add_item_keeps_different_prices_separate():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 250)
    invoice.add_item("Widget", 300)
    assert [item.unit_price for item in invoice.items] == [250, 300]


def test_add_item_keeps_different_taxability_separate():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 250, taxable=True)
    invoice.add_item("Widget", 250, taxable=False)
    assert len(invoice.items) == 2


def test_add_item_zero_quantity_raises():
    invoice = Invoice("INV-1")
    with pytest.raises(ValueError, match="quantity must be positive"):
        invoice.add_item("Widget", 250, 0)


def test_remove_item_partial_quantity():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 250, 5)
    invoice.remove_item("Widget", 2)
    assert invoice.items[0].quantity == 3


def test_remove_item_exact_quantity_drops_line():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 250, 2)
    invoice.remove_item("Widget", 2)
    assert invoice.items == []


def test_remove_item_more_than_quantity_drops_line():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 250, 2)
    invoice.remove_item("Widget", 9)
    assert invoice.items == []


def test_remove_item_without_quantity_drops_whole_line():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 250, 7)
    invoice.add_item("Gadget", 100)
    invoice.remove_item("Widget")
    assert [item.description for item in invoice.items] == ["Gadget"]


def test_remove_item_only_touches_first_matching_line():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 250)
    invoice.add_item("Widget", 300)
    invoice.remove_item("Widget")
    assert [item.unit_price for item in invoice.items] == [300]


def test_remove_missing_item_raises_key_error():
    invoice = Invoice("INV-1")
    with pytest.raises(KeyError, match="no line item named 'Ghost'"):
        invoice.remove_item("Ghost")


def test_remove_item_zero_quantity_raises():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 250, 2)
    with pytest.raises(ValueError, match="quantity to remove must be positive"):
        invoice.remove_item("Widget", 0)


# --- totals ----------------------------------------------------------------


def test_empty_invoice_totals_are_zero():
    invoice = Invoice("INV-1", tax_rate_bp=825)
    assert invoice.subtotal() == 0
    assert invoice.tax() == 0
    assert invoice.total() == 0


def test_subtotal_sums_line_amounts():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 250, 4)
    invoice.add_item("Gadget", 1999)
    assert invoice.subtotal() == 2999


def test_taxable_subtotal_skips_untaxed_lines():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 10000)
    invoice.add_item("Food", 5000, taxable=False)
    assert invoice.taxable_subtotal() == 10000


def test_tax_only_on_taxable_lines():
    invoice = Invoice("INV-1", tax_rate_bp=825)
    invoice.add_item("Widget", 10000)
    invoice.add_item("Food", 5000, taxable=False)
    assert invoice.tax() == 825


def test_total_without_coupon_is_subtotal_plus_tax():
    invoice = Invoice("INV-1", tax_rate_bp=825)
    invoice.add_item("Widget", 10000)
    assert invoice.total() == 10825


def test_discount_is_zero_without_coupon():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 10000)
    assert invoice.discount() == 0


def test_discount_uses_coupon_on_subtotal():
    invoice = Invoice("INV-1", coupon=Coupon("TEN", "percent", 1000))
    invoice.add_item("Widget", 4000)
    invoice.add_item("Food", 1000, taxable=False)
    assert invoice.discount() == 500


def test_tax_base_takes_proportional_share_of_discount():
    invoice = Invoice("INV-1", tax_rate_bp=825, coupon=Coupon("OFF15", "fixed", 1500))
    invoice.add_item("Widget", 10000)
    invoice.add_item("Food", 5000, taxable=False)
    # taxable share of the discount is 1000, so tax is 8.25% of 9000 = 742.5 -> 743
    assert invoice.tax() == 743


def test_total_with_coupon_subtracts_discount_and_adds_tax():
    invoice = Invoice("INV-1", tax_rate_bp=825, coupon=Coupon("OFF15", "fixed", 1500))
    invoice.add_item("Widget", 10000)
    invoice.add_item("Food", 5000, taxable=False)
    assert invoice.total() == 14243


def test_split_invoice_total_sums_exactly():
    invoice = Invoice("INV-1", tax_rate_bp=825)
    invoice.add_item("Widget", 10000)
    assert invoice.split(2) == [5413, 5412]
    assert invoice.split(3) == [3609, 3608, 3608]


def _sample_invoice(coupon=None):
    invoice = Invoice("INV-7", tax_rate_bp=1000, coupon=coupon)
    invoice.add_item("Pen", 150, 2)
    invoice.add_item("Notebook", 1250)
    return invoice


def test_render_lists_lines_and_totals_with_discount():
    invoice = _sample_invoice(Coupon("SAVE2", "fixed", 200))
    assert invoice.render() == [
        "Invoice INV-7",
        "2 x Pen @ $1.50 = $3.00",
        "1 x Notebook @ $12.50 = $12.50",
        "Subtotal: $15.50",
        "Discount (SAVE2): -$2.00",
        "Tax: $1.35",
        "Total: $14.85",
    ]


def test_render_omits_discount_row_without_coupon():
    rows = _sample_invoice().render("€")
    assert rows[-3:] == ["Subtotal: €15.50", "Tax: €1.55", "Total: €17.05"]
    assert not any(row.startswith("Discount") for row in rows)


def test_render_omits_discount_row_when_coupon_does_not_apply():
    rows = _sample_invoice(Coupon("BIG", "fixed", 200, min_spend=100000)).render()
    assert len(rows) == 6


def test_invoice_without_tax_rate_charges_no_tax():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 10000)
    assert invoice.tax() == 0
    assert invoice.total() == 10000


def test_add_item_zero_quantity_to_existing_line_raises():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 250, 2)
    with pytest.raises(ValueError, match="quantity must be positive"):
        invoice.add_item("Widget", 250, 0)
    assert invoice.items[0].quantity == 2


def test_remove_single_unit():
    invoice = Invoice("INV-1")
    invoice.add_item("Widget", 250, 5)
    invoice.remove_item("Widget", 1)
    assert invoice.items[0].quantity == 4


def test_render_shows_one_cent_discount():
    rows = _sample_invoice(Coupon("PENNY", "fixed", 1)).render()
    assert "Discount (PENNY): -$0.01" in rows
