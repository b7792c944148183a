"""Hourly summary of station readings."""

import csv
from collections import defaultdict


def hourly_means(path):
    sums = defaultdict(lambda: [0.0, 0])
    with open(path) as f:
        for row in csv.DictReader(f):
            key = (row["station"], row["timestamp"][:13])
            sums[key][0] += float(row["temperature_c"])
            sums[key][1] += 1
    return {k: total / n for k, (total, n) in sums.items()}
