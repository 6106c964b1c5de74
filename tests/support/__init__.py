"""What the tests share: the repository's test data, the Kubernetes API-server stand-in,
runtime harnesses, conformance object sets. Test files import from here, never from each other."""
