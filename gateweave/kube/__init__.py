"""Kubernetes API helpers: a small generic client over kubernetes_asyncio, resource paths."""
