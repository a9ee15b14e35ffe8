"""Progressive tax brackets, percentage discounts and coupons."""

from dataclasses import dataclass

from ledger.money import percent_of, round_div

# A bracket is (upper_limit_in_cents, rate_in_basis_points); the last bracket has limit None.
Bracket = tuple[int | None, int]


def validate_brackets(brackets: list[Bracket]) -> None:
    """Check that bracket limits strictly increase, rates are 0..10000 bp and the last is open."""
    if not brackets:
        raise ValueError("at least one bracket is required")
    previous = 0
    for position, (limit, rate) in enumerate(brackets):
        is_last = position == len(brackets) - 1
        if not 0 <= rate <= 10000:
            raise ValueError(f"bracket rate must be between 0 and 10000 basis points, got {rate}")
        if limit is None:
            if not is_last:
                raise ValueError("only the last bracket may be open-ended")
            continue
        if is_last:
            raise ValueError("the last bracket must be open-ended (limit None)")
        if limit <= previous:
            raise ValueError("bracket limits must be strictly increasing")
        previous = limit


def progressive_tax(income: int, brackets: list[Bracket]) -> int:
    """Tax owed on `income` cents: each slice is taxed at its own bracket's rate, rounded once at the end."""
    validate_brackets(brackets)
    if income <= 0:
        return 0
    lower = 0
    weighted = 0
    for limit, rate in brackets:
        upper = income if limit is None else min(income, limit)
        if upper <= lower:
            break
        weighted += (upper - lower) * rate
        lower = upper
    return round_div(weighted, 10000)


def marginal_rate(income: int, brackets: list[Bracket]) -> int:
    """Rate (bp) of the bracket holding the last cent of `income`; a limit belongs to the lower bracket."""
    validate_brackets(brackets)
    for limit, rate in brackets:
        if limit is None or income <= limit:
            return rate
    raise AssertionError("unreachable: last bracket is open-ended")


def effective_rate(income: int, brackets: list[Bracket]) -> int:
    """Total tax as a share of income, in basis points rounded half-up; zero for zero income."""
    if income <= 0:
        return 0
    tax = progressive_tax(income, brackets)
    return round_div(tax * 10000, income)


def apply_discount(amount: int, percent_bp: int, cap: int | None = None) -> int:
    """Return `amount` reduced by `percent_bp` basis points, the reduction limited to `cap` cents."""
    if not 0 <= percent_bp <= 10000:
        raise ValueError("discount percent must be between 0 and 10000 basis points")
    if cap is not None and cap < 0:
        raise ValueError("discount cap must not be negative")
    discount = percent_of(amount, percent_bp)
    if cap is not None and discount > cap:
        discount = cap
    return amount - discount


@dataclass(frozen=True)
class Coupon:
    """A coupon worth a percentage (value in bp) or a fixed amount (value in cents)."""

    code: str
    kind: str
    value: int
    min_spend: int = 0
    max_discount: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("percent", "fixed"):
            raise ValueError(f"coupon kind must be 'percent' or 'fixed', got {self.kind!r}")
        if self.value < 0:
            raise ValueError("coupon value must not be negative")
        if self.kind == "percent" and self.value > 10000:
            raise ValueError("percent coupon cannot exceed 10000 basis points")


def coupon_discount(subtotal: int, coupon: Coupon) -> int:
    """Discount (cents) `coupon` gives on `subtotal`, honouring min spend and cap, never above subtotal."""
    if subtotal <= 0 or subtotal < coupon.min_spend:
        return 0
    discount = coupon.value
    if coupon.kind == "percent":
        discount = percent_of(subtotal, coupon.value)
    if coupon.max_discount is not None and discount > coupon.max_discount:
        discount = coupon.max_discount
    return min(discount, subtotal)


def best_coupon(subtotal: int, coupons: list[Coupon]) -> Coupon | None:
    """The coupon giving the largest discount on `subtotal` (first one on ties), or None if none helps."""
    best = None
    best_amount = 0
    for coupon in coupons:
        amount = coupon_discount(subtotal, coupon)
        if amount > best_amount:
            best = coupon
            best_amount = amount
    return best
