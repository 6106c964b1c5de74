"""gateweave's tests, one package per stage of the product (api, translate, xds, infra,
runtime, serve, cli, providers, kube) and of its harnesses (conformance, bench); what
they share is in :mod:`tests.support`."""
