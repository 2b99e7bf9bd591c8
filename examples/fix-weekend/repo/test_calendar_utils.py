import datetime
import unittest

from calendar_utils import is_weekend, next_workday


class WeekendTest(unittest.TestCase):
    def test_saturday_and_sunday_are_weekend(self):
        self.assertTrue(is_weekend(datetime.date(2026, 11, 28)))
        self.assertTrue(is_weekend(datetime.date(2026, 11, 29)))

    def test_friday_is_not(self):
        self.assertFalse(is_weekend(datetime.date(2026, 11, 27)))

    def test_next_workday_skips_the_weekend(self):
        self.assertEqual(next_workday(datetime.date(2026, 11, 27)), datetime.date(2026, 11, 30))


if __name__ == "__main__":
    unittest.main()
