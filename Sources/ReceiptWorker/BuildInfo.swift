import CBuildInfo
public import Flows
public import Observability

/// What this build is.
public enum BuildInfo {
    /// The release: the one place that names it (`receipt-worker --version`, `receipt_worker_build_info`); the
    /// image tag in deploy/kubernetes/kustomization.yaml, the AsyncAPI documents' version and CHANGELOG.md's newest
    /// heading follow it (the deploy check holds them to it). Between releases main carries the next one as a
    /// pre-release, `X.Y.Z-dev`; scripts/release.sh cuts `X.Y.Z` (docs/releasing.md).
    public static let version = "1.1.0-dev"

    /// The source revision (git commit) it was built from, or `unknown` (Package.swift says how it is found).
    public static let revision = String(cString: receipt_worker_revision())

    /// The allocator serving this process's malloc: `jemalloc 5.3.0` in the worker's binary, `glibc` where it
    /// was not linked (a test's process).
    public static let allocator = String(cString: receipt_worker_allocator())
}

extension WorkerMetrics {
    /// A process's metrics: the flows' series and `receipt_worker_build_info`.
    public static func ofProcess(registry: MetricsRegistry = MetricsRegistry()) -> WorkerMetrics {
        let metrics = WorkerMetrics(registry: registry)
        metrics.registry.gauge(
            "receipt_worker_build_info",
            help: "1, labelled with the release, the source revision and the allocator this process runs.",
            labels: ["version": BuildInfo.version, "revision": BuildInfo.revision, "allocator": BuildInfo.allocator]
        ).set(1)
        return metrics
    }
}
