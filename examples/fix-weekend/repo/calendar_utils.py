"""Small date helpers."""

import datetime


def is_weekend(day: datetime.date) -> bool:
    """True on Saturdays and Sundays."""
    return day.weekday() > 5


def next_workday(day: datetime.date) -> datetime.date:
    """The first weekday after `day`."""
    day += datetime.timedelta(days=1)
    while is_weekend(day):
        day += datetime.timedelta(days=1)
    return day
