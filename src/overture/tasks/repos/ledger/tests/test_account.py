import pytest
from ledger import Account, InsufficientFunds, Statement, check_date, days_in_month

# --- calendar helpers ------------------------------------------------------


@pytest.mark.parametrize(
    ("year", "month", "days"),
    [
        (2024, 2, 29),
        (2023, 2, 28),
        (1900, 2, 28),
        (2000, 2, 29),
        (2024, 1, 31),
        (2024, 4, 30),
        (2024, 6, 30),
        (2024, 9, 30),
        (2024, 11, 30),
        (2024, 12, 31),
    ],
)
def test_days_in_month(year, month, days):
    assert days_in_month(year, month) == days


def test_check_date_returns_valid_date():
    assert check_date("2024-02-29") == "2024-02-29"
    assert check_date("2024-12-31") == "2024-12-31"


@pytest.mark.parametrize("date", ["2024-2-01", "abcd-ef-gh", "2024-01-01-01", "20240101", "2024-01-1x"])
def test_check_date_rejects_bad_shape(date):
    with pytest.raises(ValueError, match="must look like YYYY-MM-DD"):
        check_date(date)


@pytest.mark.parametrize("date", ["2024-13-01", "2024-00-10"])
def test_check_date_rejects_month_out_of_range(date):
    with pytest.raises(ValueError, match="month out of range"):
        check_date(date)


@pytest.mark.parametrize("date", ["2023-02-29", "2024-04-31", "2024-04-00", "2024-01-32"])
def test_check_date_rejects_day_out_of_range(date):
    with pytest.raises(ValueError, match="day out of range"):
        check_date(date)


# --- deposits and withdrawals ----------------------------------------------


def test_account_rejects_negative_overdraft_limit():
    with pytest.raises(ValueError, match="overdraft limit must not be negative"):
        Account("ops", overdraft_limit=-1)


def test_account_rejects_negative_overdraft_fee():
    with pytest.raises(ValueError, match="overdraft fee must not be negative"):
        Account("ops", overdraft_fee=-1)


def test_new_account_balance_is_opening_balance():
    account = Account("ops", opening_balance=500)
    assert account.name == "ops"
    assert account.balance == 500


def test_deposit_of_one_cent():
    account = Account("ops")
    account.deposit("2024-01-05", 1)
    assert account.balance == 1


def test_withdraw_of_one_cent():
    account = Account("ops", opening_balance=1)
    account.withdraw("2024-01-05", 1)
    assert account.balance == 0


def test_one_cent_overdraft_fee_is_charged():
    account = Account("ops", overdraft_limit=100, overdraft_fee=1)
    account.withdraw("2024-01-05", 10)
    assert account.balance == -11


def test_deposit_increases_balance_and_records_entry():
    account = Account("ops", opening_balance=500)
    entry = account.deposit("2024-01-05", 250, "sale")
    assert account.balance == 750
    assert (entry.kind, entry.amount, entry.memo, entry.balance) == ("deposit", 250, "sale", 750)


@pytest.mark.parametrize("amount", [0, -5])
def test_deposit_must_be_positive(amount):
    with pytest.raises(ValueError, match="deposit amount must be positive"):
        Account("ops").deposit("2024-01-05", amount)


def test_withdraw_decreases_balance_with_negative_entry():
    account = Account("ops", opening_balance=500)
    entry = account.withdraw("2024-01-05", 200)
    assert account.balance == 300
    assert (entry.kind, entry.amount, entry.balance) == ("withdrawal", -200, 300)


@pytest.mark.parametrize("amount", [0, -5])
def test_withdraw_must_be_positive(amount):
    with pytest.raises(ValueError, match="withdrawal amount must be positive"):
        Account("ops", opening_balance=500).withdraw("2024-01-05", amount)


def test_withdraw_down_to_exactly_zero_is_allowed_without_fee():
    account = Account("ops", opening_balance=500, overdraft_fee=35)
    account.withdraw("2024-01-05", 500)
    assert account.balance == 0
    assert len(account.entries) == 1


def test_withdraw_one_cent_over_balance_without_overdraft_raises():
    account = Account("ops", opening_balance=500)
    with pytest.raises(InsufficientFunds, match="would leave -1"):
        account.withdraw("2024-01-05", 501)
    assert account.entries == []


def test_withdraw_down_to_overdraft_limit_is_allowed():
    account = Account("ops", opening_balance=500, overdraft_limit=1000)
    account.withdraw("2024-01-05", 1500)
    assert account.balance == -1000


def test_withdraw_one_cent_past_overdraft_limit_raises():
    account = Account("ops", opening_balance=500, overdraft_limit=1000)
    with pytest.raises(InsufficientFunds, match="below -1000"):
        account.withdraw("2024-01-05", 1501)


def test_overdraft_fee_charged_when_withdrawal_goes_negative():
    account = Account("ops", opening_balance=500, overdraft_limit=1000, overdraft_fee=35)
    entry = account.withdraw("2024-01-05", 600)
    assert entry.balance == -100
    assert [(e.kind, e.amount) for e in account.entries] == [("withdrawal", -600), ("fee", -35)]
    assert account.balance == -135


def test_overdraft_fee_may_go_beyond_limit():
    account = Account("ops", opening_balance=500, overdraft_limit=1000, overdraft_fee=35)
    account.withdraw("2024-01-05", 1500)
    assert account.balance == -1035


def test_no_fee_entry_when_fee_is_zero():
    account = Account("ops", opening_balance=0, overdraft_limit=1000)
    account.withdraw("2024-01-05", 100)
    assert [e.kind for e in account.entries] == ["withdrawal"]


def test_entries_out_of_date_order_raise():
    account = Account("ops")
    account.deposit("2024-01-10", 100)
    with pytest.raises(ValueError, match="date order"):
        account.deposit("2024-01-09", 100)


def test_entries_on_same_date_are_allowed():
    account = Account("ops")
    account.deposit("2024-01-10", 100)
    account.deposit("2024-01-10", 50)
    assert account.balance == 150


def test_deposit_with_invalid_date_raises():
    with pytest.raises(ValueError, match="day out of range"):
        Account("ops").deposit("2024-02-30", 100)


# --- history ---------------------------------------------------------------


def _busy_account():
    account = Account("ops", opening_balance=1000, overdraft_limit=1000, overdraft_fee=25)
    account.deposit("2024-01-10", 500)  # 1500
    account.withdraw("2024-01-20", 300)  # 1200
    account.deposit("2024-02-01", 2000)  # 3200
    account.withdraw("2024-02-15", 3500)  # -300, fee -> -325
    account.deposit("2024-02-29", 1000)  # 675
    account.withdraw("2024-03-03", 100)  # 575
    return account


def test_balance_history_empty_account():
    assert Account("ops").balance_history() == []


def test_balance_history_keeps_last_balance_of_each_day():
    account = Account("ops")
    account.deposit("2024-01-05", 1000)
    account.withdraw("2024-01-05", 200)
    account.deposit("2024-01-07", 50)
    assert account.balance_history() == [("2024-01-05", 800), ("2024-01-07", 850)]


def test_balance_history_includes_fee_in_end_of_day_balance():
    history = _busy_account().balance_history()
    assert history == [
        ("2024-01-10", 1500),
        ("2024-01-20", 1200),
        ("2024-02-01", 3200),
        ("2024-02-15", -325),
        ("2024-02-29", 675),
        ("2024-03-03", 575),
    ]


def test_balance_on_before_first_entry_is_opening():
    assert _busy_account().balance_on("2024-01-09") == 1000


def test_balance_on_entry_date_is_end_of_day_balance():
    assert _busy_account().balance_on("2024-02-15") == -325


def test_balance_on_between_entries_uses_previous_entry():
    assert _busy_account().balance_on("2024-02-20") == -325
    assert _busy_account().balance_on("2024-01-19") == 1500


def test_balance_on_after_last_entry_is_current_balance():
    assert _busy_account().balance_on("2025-01-01") == 575


def test_balance_on_rejects_invalid_date():
    with pytest.raises(ValueError, match="must look like YYYY-MM-DD"):
        _busy_account().balance_on("yesterday")


def test_lowest_balance_without_entries_is_opening():
    assert Account("ops", opening_balance=-20).lowest_balance() == -20


def test_lowest_balance_finds_deepest_dip():
    assert _busy_account().lowest_balance() == -325


def test_lowest_balance_can_be_opening_balance():
    account = Account("ops", opening_balance=100)
    account.deposit("2024-01-01", 50)
    assert account.lowest_balance() == 100


# --- statements ------------------------------------------------------------


def test_statement_for_month_with_overdraft_fee():
    assert _busy_account().statement("2024-02") == Statement("2024-02", 1200, 3000, 3500, 25, 675, 4)


def test_statement_for_first_month_opens_with_opening_balance():
    assert _busy_account().statement("2024-01") == Statement("2024-01", 1000, 500, 300, 0, 1200, 2)


def test_statement_opening_is_previous_month_closing():
    assert _busy_account().statement("2024-03") == Statement("2024-03", 675, 0, 100, 0, 575, 1)


def test_statement_for_quiet_month_after_activity():
    assert _busy_account().statement("2024-05") == Statement("2024-05", 575, 0, 0, 0, 575, 0)


def test_statement_for_month_before_any_activity():
    assert _busy_account().statement("2023-12") == Statement("2023-12", 1000, 0, 0, 0, 1000, 0)


def test_statement_closing_matches_balance_on_month_end():
    account = _busy_account()
    assert account.statement("2024-02").closing == account.balance_on("2024-02-29")


def test_statement_rejects_invalid_month():
    with pytest.raises(ValueError, match="month out of range"):
        _busy_account().statement("2024-13")
