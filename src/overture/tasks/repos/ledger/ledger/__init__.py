"""ledger: small-business money arithmetic in integer cents."""

from ledger.account import Account, Entry, InsufficientFunds, Statement, check_date, days_in_month
from ledger.invoice import Invoice, LineItem
from ledger.loan import (
    Installment,
    amortization_schedule,
    monthly_interest,
    monthly_payment,
    remaining_balance,
    total_interest,
)
from ledger.money import (
    format_amount,
    group_thousands,
    parse_amount,
    percent_of,
    round_div,
    split_by_weights,
    split_evenly,
)
from ledger.pricing import (
    Coupon,
    apply_discount,
    best_coupon,
    coupon_discount,
    effective_rate,
    marginal_rate,
    progressive_tax,
    validate_brackets,
)

__all__ = [
    "Account",
    "Coupon",
    "Entry",
    "Installment",
    "InsufficientFunds",
    "Invoice",
    "LineItem",
    "Statement",
    "amortization_schedule",
    "apply_discount",
    "best_coupon",
    "check_date",
    "coupon_discount",
    "days_in_month",
    "effective_rate",
    "format_amount",
    "group_thousands",
    "marginal_rate",
    "monthly_interest",
    "monthly_payment",
    "parse_amount",
    "percent_of",
    "progressive_tax",
    "remaining_balance",
    "round_div",
    "split_by_weights",
    "split_evenly",
    "total_interest",
    "validate_brackets",
]
