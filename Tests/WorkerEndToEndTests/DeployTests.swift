import Foundation
import Testing

/// deploy/: what can be checked without a cluster, an engine or systemd running (Tests/deploy/check_deploy.py).
@Suite("Deployment files") struct DeployTests {
    @Test(
        "manifests parse and agree with the configuration; the systemd unit verifies; rules and dashboard are well formed"
    )
    func deployChecks() async throws {
        let script = MetricsEndpointTests.repositoryRoot.appendingPathComponent("Tests/deploy/check_deploy.py").path
        let run = try await CommandLineRun.run(
            [script, "--binary", WorkerProcess.binary], executable: "/usr/bin/python3")
        #expect(run.status == 0, "\(run.output)\(run.errors)")
        #expect(run.output.contains("all deploy checks passed"))
    }
}
