import Foundation
import Testing

/// deploy/: what can be checked without a cluster, an engine or systemd running (Tests/deploy/check_deploy.py).
@Suite("Deployment files") struct DeployTests {
    @Test(
        "manifests render as kustomize does, validate against the Kubernetes and KEDA schemas, and agree with the configuration; the systemd unit verifies; rules and dashboard are well formed"
    )
    func deployChecks() async throws {
        let root = MetricsEndpointTests.repositoryRoot
        let script = root.appendingPathComponent("Tests/deploy/check_deploy.py").path
        // The test tools' Python, made by scripts/setup.sh: pyyaml, jsonschema and kubernetes-validate, pinned.
        let python = root.appendingPathComponent(".deps/venv/bin/python").path
        let run = try await CommandLineRun.run([script, "--binary", WorkerProcess.binary], executable: python)
        #expect(run.status == 0, "\(run.output)\(run.errors)")
        #expect(run.output.contains("all deploy checks passed"))
    }
}
