"""CSV output: header order, cells, round trip."""

import csv
import io
import os
import tempfile
import unittest

import helpers  # noqa: F401  (sets sys.path)

from lib import csvout
from lib.errors import BenchError


class Csv(unittest.TestCase):
    rows = [{"case": "proto-C", "rep": 1, "iops": 1234.56789012},
            {"case": "standalone", "rep": 1, "iops": None, "extra": "a,b"},
            {"case": "x", "rep": 2, "ok": True}]

    def test_columns_union_in_first_appearance_order(self):
        self.assertEqual(csvout.columns(self.rows), ["case", "rep", "iops", "extra", "ok"])

    def test_round_trip(self):
        parsed = list(csv.reader(io.StringIO(csvout.to_csv(self.rows))))
        self.assertEqual(parsed[0], ["case", "rep", "iops", "extra", "ok"])
        self.assertEqual(parsed[1], ["proto-C", "1", "1234.56789", "", ""])
        self.assertEqual(parsed[2], ["standalone", "1", "", "a,b", ""])
        self.assertEqual(parsed[3], ["x", "2", "", "", "true"])
        self.assertEqual(len(parsed), 4)

    def test_nested_value_rejected(self):
        with self.assertRaises(BenchError):
            csvout.to_csv([{"cpu": {"alice": 1}}])

    def test_write_csv(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.csv")
            self.assertEqual(csvout.write_csv(path, self.rows), 3)
            with open(path, encoding="utf-8") as f:
                self.assertEqual(f.read(), csvout.to_csv(self.rows))


if __name__ == "__main__":
    unittest.main()
