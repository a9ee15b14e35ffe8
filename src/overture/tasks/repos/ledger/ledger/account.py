"""An account ledger with running balances, overdraft rules and monthly statements."""

from dataclasses import dataclass


class InsufficientFunds(Exception):
    """Raised when a withdrawal would take the balance below the overdraft limit."""


@dataclass(frozen=True)
class Entry:
    """One posted entry; `amount` is signed and `balance` is the balance right after it."""

    date: str
    kind: str
    amount: int
    memo: str
    balance: int


@dataclass(frozen=True)
class Statement:
    """Totals for one calendar month; withdrawals and fees are positive numbers."""

    month: str
    opening: int
    deposits: int
    withdrawals: int
    fees: int
    closing: int
    entry_count: int


def days_in_month(year: int, month: int) -> int:
    """Number of days in a month of the Gregorian calendar."""
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    if month in (4, 6, 9, 11):
        return 30
    return 31


def check_date(date: str) -> str:
    """Validate an ISO date "YYYY-MM-DD" (shape, month 1-12, day within the month) and return it."""
    parts = date.split("-")
    if [len(part) for part in parts] != [4, 2, 2] or not all(part.isdecimal() for part in parts):
        raise ValueError(f"date must look like YYYY-MM-DD: {date!r}")
    year, month, day = (int(part) for part in parts)
    if not 1 <= month <= 12:
        raise ValueError(f"month out of range: {date!r}")
    if not 1 <= day <= days_in_month(year, month):
        raise ValueError(f"day out of range: {date!r}")
    return date


class Account:
    """A single-currency account; the balance may go down to -overdraft_limit."""

    def __init__(self, name: str, opening_balance: int = 0, overdraft_limit: int = 0, overdraft_fee: int = 0):
        if overdraft_limit < 0:
            raise ValueError("overdraft limit must not be negative")
        if overdraft_fee < 0:
            raise ValueError("overdraft fee must not be negative")
        self.name = name
        self.opening_balance = opening_balance
        self.overdraft_limit = overdraft_limit
        self.overdraft_fee = overdraft_fee
        self.entries: list[Entry] = []

    @property
    def balance(self) -> int:
        """Current balance: that after the last entry, or the opening balance."""
        if self.entries:
            return self.entries[-1].balance
        return self.opening_balance

    def _post(self, date: str, kind: str, amount: int, memo: str) -> Entry:
        check_date(date)
        if self.entries and date < self.entries[-1].date:
            raise ValueError(f"entries must be in date order: {date} is before {self.entries[-1].date}")
        entry = Entry(date, kind, amount, memo, self.balance + amount)
        self.entries.append(entry)
        return entry

    def deposit(self, date: str, amount: int, memo: str = "") -> Entry:
        """Post a positive deposit and return the entry."""
        if amount <= 0:
            raise ValueError("deposit amount must be positive")
        return self._post(date, "deposit", amount, memo)

    def withdraw(self, date: str, amount: int, memo: str = "") -> Entry:
        """Post a withdrawal; refused below -overdraft_limit. Charges the overdraft fee when it ends negative.

        The fee is posted as a separate "fee" entry and may itself go beyond the limit.
        """
        if amount <= 0:
            raise ValueError("withdrawal amount must be positive")
        new_balance = self.balance - amount
        if new_balance < -self.overdraft_limit:
            limit = -self.overdraft_limit
            raise InsufficientFunds(f"withdrawal of {amount} would leave {new_balance}, below {limit}")
        entry = self._post(date, "withdrawal", -amount, memo)
        if new_balance < 0 and self.overdraft_fee > 0:
            self._post(date, "fee", -self.overdraft_fee, "overdraft fee")
        return entry

    def balance_history(self) -> list[tuple[str, int]]:
        """End-of-day balances as (date, balance), one pair per date that has entries."""
        history: list[tuple[str, int]] = []
        for entry in self.entries:
            if history and history[-1][0] == entry.date:
                history[-1] = (entry.date, entry.balance)
            else:
                history.append((entry.date, entry.balance))
        return history

    def balance_on(self, date: str) -> int:
        """Balance at the end of `date` (the opening balance before the first entry)."""
        check_date(date)
        balance = self.opening_balance
        for entry in self.entries:
            if entry.date > date:
                break
            balance = entry.balance
        return balance

    def lowest_balance(self) -> int:
        """Lowest balance ever reached, including the opening balance."""
        lowest = self.opening_balance
        for entry in self.entries:
            if entry.balance < lowest:
                lowest = entry.balance
        return lowest

    def statement(self, month: str) -> Statement:
        """Opening and closing balance plus deposit, withdrawal and fee totals for month "YYYY-MM"."""
        check_date(month + "-01")
        opening = self.opening_balance
        deposits = withdrawals = fees = 0
        count = 0
        for entry in self.entries:
            entry_month = entry.date[:7]
            if entry_month < month:
                opening = entry.balance
            elif entry_month == month:
                count += 1
                if entry.kind == "deposit":
                    deposits += entry.amount
                elif entry.kind == "withdrawal":
                    withdrawals -= entry.amount
                else:
                    fees -= entry.amount
        closing = opening + deposits - withdrawals - fees
        return Statement(month, opening, deposits, withdrawals, fees, closing, count)
