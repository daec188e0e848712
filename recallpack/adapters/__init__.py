"""Host-framework adapters. Each is imported on its own (``recallpack.adapters.langchain``,
``recallpack.adapters.llamaindex``) and needs its extra installed."""
