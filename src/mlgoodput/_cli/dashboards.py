"""`mlgoodput dashboards`."""
def register(sub): pass
