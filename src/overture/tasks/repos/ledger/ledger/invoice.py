"""Invoices made of line items, with coupon discount, tax and total."""

from dataclasses import dataclass

from ledger.money import format_amount, percent_of, round_div, split_evenly
from ledger.pricing import Coupon, coupon_discount


@dataclass
class LineItem:
    """One invoice line: unit price in cents times a positive quantity."""

    description: str
    unit_price: int
    quantity: int = 1
    taxable: bool = True

    def __post_init__(self) -> None:
        if not self.description.strip():
            raise ValueError("line item needs a description")
        if self.unit_price < 0:
            raise ValueError("unit price must not be negative")
        if self.quantity <= 0:
            raise ValueError("quantity must be positive")

    def amount(self) -> int:
        """Line amount: unit price times quantity."""
        return self.unit_price * self.quantity


class Invoice:
    """An invoice with a tax rate in basis points and an optional coupon."""

    def __init__(self, number: str, tax_rate_bp: int = 0, coupon: Coupon | None = None) -> None:
        if tax_rate_bp < 0:
            raise ValueError("tax rate must not be negative")
        self.number = number
        self.tax_rate_bp = tax_rate_bp
        self.coupon = coupon
        self.items: list[LineItem] = []

    def add_item(
        self, description: str, unit_price: int, quantity: int = 1, taxable: bool = True
    ) -> LineItem:
        """Add a line; a line with the same description, price and taxability gets its quantity increased."""
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        for item in self.items:
            if item.description == description and item.unit_price == unit_price and item.taxable == taxable:
                item.quantity += quantity
                return item
        item = LineItem(description, unit_price, quantity, taxable)
        self.items.append(item)
        return item

    def remove_item(self, description: str, quantity: int | None = None) -> None:
        """Remove `quantity` units of the named line, or the whole line when quantity is None or covers it."""
        if quantity is not None and quantity <= 0:
            raise ValueError("quantity to remove must be positive")
        for index, item in enumerate(self.items):
            if item.description == description:
                if quantity is None or quantity >= item.quantity:
                    del self.items[index]
                else:
                    item.quantity -= quantity
                return
        raise KeyError(f"no line item named {description!r}")

    def subtotal(self) -> int:
        """Sum of all line amounts before discount and tax."""
        total = 0
        for item in self.items:
            total += item.amount()
        return total

    def taxable_subtotal(self) -> int:
        """Sum of the taxable line amounts before discount."""
        total = 0
        for item in self.items:
            if item.taxable:
                total += item.amount()
        return total

    def discount(self) -> int:
        """Coupon discount on the subtotal (0 without a coupon)."""
        if self.coupon is None:
            return 0
        return coupon_discount(self.subtotal(), self.coupon)

    def tax(self) -> int:
        """Tax on the taxable lines after they take their proportional share of the discount."""
        subtotal = self.subtotal()
        if subtotal == 0:
            return 0
        taxable = self.taxable_subtotal()
        discount_share = round_div(self.discount() * taxable, subtotal)
        return percent_of(taxable - discount_share, self.tax_rate_bp)

    def total(self) -> int:
        """Amount due: subtotal minus discount plus tax."""
        return self.subtotal() - self.discount() + self.tax()

    def split(self, parts: int) -> list[int]:
        """Split the total into `parts` payments that sum exactly, larger payments first."""
        return split_evenly(self.total(), parts)

    def render(self, symbol: str = "$") -> list[str]:
        """Text rows for each line followed by subtotal, discount (if any), tax and total."""
        rows = [f"Invoice {self.number}"]
        for item in self.items:
            price = format_amount(item.unit_price, symbol)
            amount = format_amount(item.amount(), symbol)
            rows.append(f"{item.quantity} x {item.description} @ {price} = {amount}")
        rows.append(f"Subtotal: {format_amount(self.subtotal(), symbol)}")
        discount = self.discount()
        if discount > 0 and self.coupon is not None:
            rows.append(f"Discount ({self.coupon.code}): {format_amount(-discount, symbol)}")
        rows.append(f"Tax: {format_amount(self.tax(), symbol)}")
        rows.append(f"Total: {format_amount(self.total(), symbol)}")
        return rows
