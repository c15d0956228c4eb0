"""Reports: the data of a report gathered apart from how it is printed."""
