@testable import AppleVerification
import Crypto
import Foundation
import HTTPClient
import Observability
import Synchronization
import TestSupport
import Testing

/// Revocation asked online, against real OCSP responders: `openssl ocsp` serving a test chain shaped like Apple's
/// (Tests/ocsp/make-pki.sh), a port nothing listens on, a server that never answers, and a responder signing with a
/// key nobody authorised. A chain is never accepted before its status is known, never denied for a responder's
/// silence, and refused for good only when a verified answer says revoked (an answer of unknown is asked again).
@Suite("Revocation checked with OCSP responders", .timeLimit(.minutes(2)))
struct RevocationCheckTests {
    /// The test PKI and its responders (``OCSPTestPKI``), stopped when it goes.
    final class Responders: Sendable {
        let pki: OCSPTestPKI

        static func start() async throws -> Responders { Responders(pki: try await OCSPTestPKI.make()) }

        private init(pki: OCSPTestPKI) { self.pki = pki }

        func data(_ name: String) throws -> Data { try pki.data(name) }

        /// A signed transaction of `com.example`, signed by the leaf `leaf` (x5c: leaf, intermediate, root); nil
        /// `environment`: one signed before Apple added the field.
        func transaction(signedBy leaf: String, bundleID: String = "com.example", environment: String? = "Production")
            throws -> String
        {
            let key = try ECPrivateKey(pem: String(decoding: try data("\(leaf).key"), as: UTF8.self))
            let signer = try JWSSigner(
                key: key, x5c: [try data("\(leaf).der"), try data("intermediate.der"), try data("root.der")])
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            return try signer.sign(
                payload: Data(
                    #"{"transactionId":"100","bundleId":"\#(bundleID)",\#(environment.map { #""environment":"\#($0)","# } ?? "")"signedDate":\#(now)}"#
                        .utf8))
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
        guard case .failure(let error) = first, error.isRevocationPending else { return first }
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

    @Test("a transaction that names no environment has its chain asked too before its id is looked up")
    func unplacedAsked() async throws {
        let responders = try await Responders.start()
        let asks = Asks()
        let (verifier, checker) = try Self.verifier(responders, asks: asks)
        for (leaf, id) in [("good", "100"), ("revoked", nil)] {
            let jws = try responders.transaction(signedBy: leaf, environment: nil)
            let missing = #expect(throws: AppleVerificationError.self) { try verifier.verifyTransaction(jws) }
            #expect(missing?.code == .environmentMissing)
            let placed = try? await verifier.settling { () throws(AppleVerificationError) in
                try verifier.unplacedTransactionID(jws)
            }
            #expect(placed == id, "\(leaf): its id only once its chain is known not revoked")
        }
        await checker.settled()
        #expect(asks.outcomes.withLock { $0 }.sorted() == ["good", "revoked"])
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
        // No answer at all may be waited for without a cap; an answer that settles nothing may not.
        let code: AppleVerificationError.Code = outcome == "unavailable" ? .revocationUnanswered : .revocationUnknown
        #expect(error.isRetriable && error.code == code, "\(error)")
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
