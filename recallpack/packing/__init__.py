"""The pure core: imports neither LangChain nor LlamaIndex. See recallpack for the public API."""
