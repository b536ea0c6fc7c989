@testable import AppleVerification
import Foundation
import HTTPClient
import Observability
import Synchronization
import TestSupport
import Testing

/// Revocation asked online, against real OCSP responders: `openssl ocsp` serving a test chain shaped like Apple's
/// (Tests/ocsp/make-pki.sh), a port nothing listens on, a server that never answers, and a responder signing with a
/// key nobody authorised. A chain is never accepted before its status is known, never denied for a responder's
/// silence, and refused for good only when a verified answer says revoked or unknown.
@Suite("Revocation checked with OCSP responders", .timeLimit(.minutes(2)))
struct RevocationCheckTests {
    /// The test PKI and its responders, stopped when it goes.
    final class Responders: Sendable {
        let directory: String
        let pids: [pid_t]

        /// Made off Swift's thread pool: the PKI's openssl runs and the waits for the servers block a thread for
        /// seconds on a busy machine, which the pool's two threads cannot spare for the tests beside.
        static func start() async throws -> Responders {
            try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(with: Result { try Responders() }) }
            }
        }

        private init() throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ocsp-\(UUID())").path
            self.directory = directory
            let ports = try (0..<5).map { _ in try freeLoopbackPort() }
            let (root, leaf, dead, slow, forged) = (ports[0], ports[1], ports[2], ports[3], ports[4])
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../ocsp/make-pki.sh").standardized.path
            let made = runAndWait(["/bin/bash", script, directory] + ports.map(String.init))
            guard made == 0 else { throw TestSupportError("make-pki.sh exited \(made)") }
            func file(_ name: String) -> String { "\(directory)/\(name)" }
            // Each server says when it listens in a log of its own (a probe connection would leave `openssl ocsp`,
            // which serves one connection at a time, waiting on it; the kernel's socket tables are megabytes
            // while the other tests hold thousands of sockets).
            func responder(port: UInt16, index: String, signer: String, ca: String) -> pid_t? {
                spawn([
                    "/bin/sh", "-c",
                    "exec /usr/bin/openssl ocsp -index \(file(index)) -port \(port) -rsigner \(file("\(signer).pem"))"
                        + " -rkey \(file("\(signer).key")) -CA \(file("\(ca).pem")) -nmin 60 > \(file("\(port).log")) 2>&1",
                ])
            }
            // A server that takes connections and never answers.
            let silent = """
                import socket, time
                s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", \(slow))); s.listen(64); held = []
                open("\(file("\(slow).log"))", "w").write("ACCEPT\\n")
                while True: held.append(s.accept()[0])
                """
            let pids = [
                responder(port: root, index: "intermediates.index", signer: "root", ca: "root"),
                responder(port: leaf, index: "leaves.index", signer: "intermediate", ca: "intermediate"),
                responder(port: forged, index: "leaves.index", signer: "stranger", ca: "intermediate"),
                spawn(["/usr/bin/python3", "-c", silent]),
            ].compactMap { $0 }
            self.pids = pids
            _ = dead  // nothing listens there
            for port in [root, leaf, forged, slow] {
                guard Self.waitForListener(log: file("\(port).log")) else {
                    for pid in pids { kill(pid, SIGKILL) }
                    for pid in pids { waitpid(pid, nil, 0) }
                    throw TestSupportError("nothing listens on \(port)")
                }
            }
        }

        deinit {
            for pid in pids { kill(pid, SIGKILL) }
            for pid in pids { waitpid(pid, nil, 0) }
            try? FileManager.default.removeItem(atPath: directory)
        }

        func data(_ name: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: "\(directory)/\(name)")) }

        /// A signed transaction of `com.example`, signed by the leaf `leaf` (x5c: leaf, intermediate, root).
        func transaction(signedBy leaf: String, bundleID: String = "com.example", environment: String = "Production")
            throws -> String
        {
            let key = try ECPrivateKey(pem: String(decoding: try data("\(leaf).key"), as: UTF8.self))
            let signer = try JWSSigner(
                key: key, x5c: [try data("\(leaf).der"), try data("intermediate.der"), try data("root.der")])
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            return try signer.sign(
                payload: Data(
                    #"{"transactionId":"100","bundleId":"\#(bundleID)","environment":"\#(environment)","signedDate":\#(now)}"#
                        .utf8))
        }

        /// Whether the server writing `log` says it listens (`openssl ocsp` prints "ACCEPT" once bound).
        static func waitForListener(log: String) -> Bool {
            for _ in 0..<1_200 {  // a minute: four processes start for each case, beside every other test
                if let text = try? String(contentsOfFile: log, encoding: .utf8), text.contains("ACCEPT") { return true }
                usleep(50_000)
            }
            return false
        }
    }

    /// What the checker asked and how it ended, as the worker counts it.
    final class Asks: Sendable {
        let outcomes = Mutex<[String]>([])
        let calls = Mutex(0)
    }

    static func verifier(_ responders: Responders, asks: Asks) throws -> (SignedDataVerifier, RevocationChecker) {
        let http = HTTPClient(configuration: .init(), logger: Logger(label: "ocsp-test", minimumLevel: .error))
        var settings = RevocationChecker.Settings()
        settings.timeout = .seconds(1)
        settings.retryAfterFailure = 0
        let checker = try RevocationChecker(
            rootCertificates: [try responders.data("root.der")], settings: settings,
            observer: { outcome, _ in asks.outcomes.withLock { $0.append(outcome) } }
        ) { url, request, timeout in
            asks.calls.withLock { $0 += 1 }
            let answer = try await http.execute(
                HTTPRequest(
                    method: .post, url: url, headers: [(name: "Content-Type", value: "application/ocsp-request")],
                    body: request, timeout: timeout))
            guard answer.status == 200 else { throw TestSupportError("HTTP \(answer.status)") }
            return answer.body
        }
        var configuration = SignedDataVerifier.Configuration(
            rootCertificates: [try responders.data("root.der")], bundleID: "com.example")
        configuration.revocation = checker
        return (try SignedDataVerifier(configuration: configuration), checker)
    }

    /// Verifies `jws` once, waits for the asks it started, and verifies again: the second outcome.
    static func settledVerification(_ jws: String, _ verifier: SignedDataVerifier, _ checker: RevocationChecker)
        async -> Result<JWSTransaction, AppleVerificationError>
    {
        let first = Result(catching: { () throws(AppleVerificationError) -> JWSTransaction in
            try verifier.verifyTransaction(jws)
        })
        guard case .failure(let error) = first, error.code == .revocationUnknown else { return first }
        #expect(error.isRetriable, "a status not known yet is never a refusal")
        await checker.settled()
        return Result(catching: { () throws(AppleVerificationError) -> JWSTransaction in
            try verifier.verifyTransaction(jws)
        })
    }

    @Test("a good chain verifies once its responders said so, and is not asked again until its next update")
    func good() async throws {
        let responders = try await Responders.start()
        let asks = Asks()
        let (verifier, checker) = try Self.verifier(responders, asks: asks)
        let jws = try responders.transaction(signedBy: "good")
        #expect(throws: AppleVerificationError.self, "not accepted before its status is known") {
            try verifier.verifyTransaction(jws)
        }
        let settled = await Self.settledVerification(jws, verifier, checker)
        #expect((try? settled.get())?.transactionId == "100")
        // The leaf's responder and the intermediate's: two asks, then none for the next hundred verifications.
        #expect(asks.calls.withLock { $0 } == 2 && asks.outcomes.withLock { $0 } == ["good"])
        for _ in 0..<100 { _ = try verifier.verifyTransaction(try responders.transaction(signedBy: "good")) }
        #expect(asks.calls.withLock { $0 } == 2)
    }

    @Test("data refused anyway (another app's, an environment not accepted, a forged signature) never causes an ask")
    func refusedDataAsksNothing() async throws {
        let responders = try await Responders.start()
        let asks = Asks()
        let (verifier, checker) = try Self.verifier(responders, asks: asks)
        let other = try responders.transaction(signedBy: "good", bundleID: "com.other")
        #expect(throws: AppleVerificationError.self) { try verifier.verifyTransaction(other) }
        let sandbox = try responders.transaction(signedBy: "good", environment: "Sandbox")
        #expect(throws: AppleVerificationError.self) { try verifier.verifyTransaction(sandbox) }
        var forged = Array(try responders.transaction(signedBy: "good").utf8)
        forged[forged.count - 5] = forged[forged.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(throws: AppleVerificationError.self) {
            try verifier.verifyTransaction(String(decoding: forged, as: UTF8.self))
        }
        await checker.settled()
        #expect(asks.calls.withLock { $0 } == 0, "the responders were asked about data refused anyway")
    }

    @Test(
        "revoked: refused (invalid_receipt), not retried", arguments: ["revoked"])
    func refused(leaf: String) async throws {
        let responders = try await Responders.start()
        let asks = Asks()
        let (verifier, checker) = try Self.verifier(responders, asks: asks)
        let settled = await Self.settledVerification(try responders.transaction(signedBy: leaf), verifier, checker)
        guard case .failure(let error) = settled else {
            Issue.record("a \(leaf) certificate verified")
            return
        }
        #expect(!error.isRetriable && error.code == .invalidCertificate, "\(error)")
        #expect(asks.outcomes.withLock { $0 } == [leaf])
        // The verdict a job gets: invalid_receipt.
        let verdict = try AppleVerifier.verdict(
            onSigned: try responders.transaction(signedBy: leaf), source: .signedTransaction, verifier: verifier)
        guard case .rejected(let rejection, _) = verdict else {
            Issue.record("a \(leaf) certificate's transaction verified")
            return
        }
        #expect(rejection.rawValue == "invalid_receipt")
    }

    @Test(
        "a responder that does not answer, answers too late, answers with a signature nobody authorised, or does not know the certificate: transient, never a deny",
        arguments: [
            ("unreachable", "unavailable"), ("slow", "unavailable"), ("forged", "untrusted"),
            // Unknown to its responder (a new certificate not yet loaded, or another CA's): asked again, never a deny.
            ("unknown", "unknown"),
        ])
    func transient(leaf: String, outcome: String) async throws {
        let responders = try await Responders.start()
        let asks = Asks()
        let (verifier, checker) = try Self.verifier(responders, asks: asks)
        let jws = try responders.transaction(signedBy: leaf)
        let started = ContinuousClock.now
        let settled = await Self.settledVerification(jws, verifier, checker)
        guard case .failure(let error) = settled else {
            Issue.record("a chain whose status is not known verified")
            return
        }
        #expect(error.isRetriable && error.code == .revocationUnknown, "\(error)")
        #expect(asks.outcomes.withLock { $0 }.first == outcome)
        // The silent responder is given up on at the timeout (1 s), never waited for (a busy machine: well within
        // 30 s).
        #expect(ContinuousClock.now - started < .seconds(30))
        // A job is retried, never denied for it.
        #expect(throws: AppleVerificationError.self) {
            try AppleVerifier.verdict(onSigned: jws, source: .signedTransaction, verifier: verifier)
        }
    }
}
