"""The monitor's insides: report-to-sample mapping, the uploader's sources, GoodputMonitor."""
