"""Loan amortization in integer cents; the last payment absorbs any rounding remainder."""

import math
from dataclasses import dataclass
from fractions import Fraction

from ledger.money import round_div


@dataclass(frozen=True)
class Installment:
    """One row of an amortization schedule (all amounts in cents)."""

    number: int
    payment: int
    interest: int
    principal: int
    balance: int


def _check_loan(principal: int, annual_rate_bp: int, months: int) -> None:
    if principal <= 0:
        raise ValueError("principal must be positive")
    if annual_rate_bp < 0:
        raise ValueError("annual rate must not be negative")
    if months < 1:
        raise ValueError("months must be at least 1")


def monthly_interest(balance: int, annual_rate_bp: int) -> int:
    """One month of interest on `balance` at an annual rate in basis points, rounded half-up."""
    return round_div(balance * annual_rate_bp, 12 * 10000)


def monthly_payment(principal: int, annual_rate_bp: int, months: int) -> int:
    """Level monthly payment that repays `principal` over `months`, rounded up to a whole cent."""
    _check_loan(principal, annual_rate_bp, months)
    if annual_rate_bp == 0:
        return -(-principal // months)
    rate = Fraction(annual_rate_bp, 12 * 10000)
    growth = (1 + rate) ** months
    exact = principal * rate * growth / (growth - 1)
    return math.ceil(exact)


def amortization_schedule(principal: int, annual_rate_bp: int, months: int) -> list[Installment]:
    """Month-by-month schedule; the final row pays off the exact balance, and it stops early at zero."""
    payment = monthly_payment(principal, annual_rate_bp, months)
    balance = principal
    rows = []
    for number in range(1, months + 1):
        interest = monthly_interest(balance, annual_rate_bp)
        amount = payment
        if number == months or balance + interest <= payment:
            amount = balance + interest
        principal_part = amount - interest
        balance -= principal_part
        rows.append(Installment(number, amount, interest, principal_part, balance))
        if balance == 0:
            break
    return rows


def total_interest(schedule: list[Installment]) -> int:
    """Sum of the interest column of a schedule."""
    total = 0
    for row in schedule:
        total += row.interest
    return total


def remaining_balance(schedule: list[Installment], payments_made: int) -> int:
    """Balance still owed after the first `payments_made` installments of a schedule."""
    if not schedule:
        raise ValueError("schedule is empty")
    if payments_made < 0:
        raise ValueError("payments made must not be negative")
    if payments_made == 0:
        first = schedule[0]
        return first.balance + first.principal
    if payments_made >= len(schedule):
        return 0
    return schedule[payments_made - 1].balance
