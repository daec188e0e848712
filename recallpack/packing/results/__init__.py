"""The results: values, their log records, their notebook HTML."""
