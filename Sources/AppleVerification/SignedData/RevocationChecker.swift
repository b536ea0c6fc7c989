import Crypto
public import Foundation
import Synchronization

/// Whether Apple revoked a certificate of a chain, asked online (OCSP) as Apple's own libraries ask: the leaf
/// and the intermediate of each chain that validated, each of the responder its certificate names.
///
/// Verification stays synchronous and never waits on the network: the answer is cached per chain (until the
/// earliest `nextUpdate` of the two, at most a day; 15 minutes when a responder names none) and refreshed in the
/// background before it runs out. A chain whose status is not known yet (the first of its kind, or a responder
/// that did not answer, or one that does not know the certificate yet) is refused with a retriable error while one
/// fetch asks: a job is retried, a notification answered 503 so that Apple sends it again, never a deny. A revoked
/// certificate is refused (`invalid_receipt`), and asked again an hour later (a responder's mistake does not last
/// until a restart). An answer that does not verify is never trusted: transient. Only chains whose signature
/// verified get here, and at most ``Settings/maximumChains`` are remembered.
public final class RevocationChecker: Sendable {
    /// POSTs an OCSP request (`application/ocsp-request`) to the responder and answers its body; throws when no
    /// HTTP 200 came within the timeout.
    public typealias Fetch = @Sendable (_ url: String, _ request: Data, _ timeout: Duration) async throws -> Data

    public struct Settings: Sendable {
        /// Per responder call. Default: 5 s.
        public var timeout: Duration = .seconds(5)
        /// After a failed ask, how long before the next (every verification meanwhile is refused, retriable).
        public var retryAfterFailure: TimeInterval = 5
        /// The longest a good answer is kept, whatever its `nextUpdate`. Default: a day.
        public var maximumAge: TimeInterval = 86_400
        /// How long a good answer without `nextUpdate` is kept. Default: 15 minutes (Apple's libraries' cache).
        public var ageWithoutNextUpdate: TimeInterval = 900
        /// How long before a good answer runs out it is asked again, in the background. Default: 5 minutes.
        public var refreshAhead: TimeInterval = 300
        /// How long a revoked certificate is refused before its responder is asked again. Default: an hour.
        public var revokedAge: TimeInterval = 3_600
        /// Chains remembered at most (Apple signs with a handful); past it, those not being asked are forgotten.
        public var maximumChains = 1_024

        public init() {}
    }

    /// What became of one ask of a chain's status, for metrics and logs: `good`, `revoked`, `unknown` (the
    /// responder does not know the certificate), `unavailable` (no answer), `untrusted` (an answer that does not
    /// verify); with why, for all but `good`.
    public typealias Observer = @Sendable (_ outcome: String, _ detail: String?) -> Void

    private enum Known {
        case good(until: Date)
        case refused(String, until: Date)
    }

    private struct State {
        var known: Known?
        var asking: Task<Void, Never>?
        /// On the monotonic clock: a wall clock stepped back would hold the next ask back by the step.
        var failedAt: ContinuousClock.Instant?
        var failure: Failure?
    }

    /// Why the last ask did not settle a chain's status.
    private struct Failure {
        var why: String
        /// No responder answered at all (not reached, timed out), as against an answer that does not settle the
        /// status (the certificate unknown to it, an answer that does not verify): a caller may wait for the first
        /// without limit, not for the others.
        var unanswered = false
    }

    private let roots: [X509Certificate]
    private let fetch: Fetch
    private let settings: Settings
    private let observer: Observer?
    private let states = Mutex<[[UInt8]: State]>([:])

    /// `roots`: the verifier's trusted roots (an answer's signer chains to one of them).
    public init(
        rootCertificates: [Data], settings: Settings = Settings(), observer: Observer? = nil, fetch: @escaping Fetch
    )
        throws(AppleVerificationError)
    {
        var roots: [X509Certificate] = []
        for bytes in rootCertificates { roots.append(try AppleVerificationError.certificate(bytes)) }
        self.roots = roots
        self.settings = settings
        self.observer = observer
        self.fetch = fetch
    }

    private enum Decision {
        case good
        case refused(String)
        case pending(Failure?)
        /// A chain not seen before: whether its certificates name a responder is read first.
        case firstSight(Failure?)
    }

    /// Throws unless the chain's certificates are known not to be revoked at `now`.
    func check(_ chain: ChainVerifier.VerifiedChain, now: Date = Date()) throws(AppleVerificationError) {
        var decision = decide(chain, now: now, firstSight: false)
        if case .firstSight = decision {
            // Nothing to ask (a test chain, a root of the studio's own): known at once, never a retry.
            guard Self.namesResponders(chain) else {
                states.withLock { $0[chain.digest] = State(known: .good(until: .distantFuture)) }
                return
            }
            decision = decide(chain, now: now, firstSight: true)
        }
        switch decision {
        case .good:
            return
        case .refused(let why):
            throw AppleVerificationError(.invalidCertificate, why)
        case .pending(let failure), .firstSight(let failure):
            throw AppleVerificationError(
                failure?.unanswered == true ? .revocationUnanswered : .revocationUnknown,
                "the certificates' revocation status is not known yet (OCSP)" + (failure.map { ": \($0.why)" } ?? ""),
                isRetriable: true)
        }
    }

    /// One look under the lock (the path of nearly every verification): the cached answer, or an ask started.
    /// A chain never seen is left to the caller to inspect first, unless `firstSight` says it was.
    private func decide(_ chain: ChainVerifier.VerifiedChain, now: Date, firstSight: Bool) -> Decision {
        states.withLock { states -> Decision in
            guard var state = states[chain.digest] else {
                guard firstSight else { return .firstSight(nil) }
                if states.count >= settings.maximumChains { states = states.filter { $0.value.asking != nil } }
                states[chain.digest] = State(asking: ask(chain))
                return .pending(nil)
            }
            let mayAsk = state.failedAt.map { ContinuousClock.now - $0 >= .seconds(settings.retryAfterFailure) } ?? true
            switch state.known {
            case .refused(let why, let until) where until > now:
                return .refused(why)
            case .good(let until) where until > now:
                // Nothing written on this path: a look-up, and an ask started only as the answer nears its end
                // (and not again right after a failed one).
                if until.timeIntervalSince(now) < settings.refreshAhead, state.asking == nil, mayAsk {
                    states[chain.digest]?.asking = ask(chain)
                }
                return .good
            default:
                if state.asking == nil, mayAsk {
                    state.asking = ask(chain)
                    states[chain.digest] = state
                }
                return .pending(state.failure)
            }
        }
    }

    /// Waits until no chain's status is being asked (each ask ends within its responders' timeouts): a caller
    /// that was refused because a status was not known yet can try once more right away.
    public func settled() async {
        let asking = states.withLock { $0.values.compactMap(\.asking) }
        for task in asking { await task.value }
    }

    private func ask(_ chain: ChainVerifier.VerifiedChain) -> Task<Void, Never> {
        Task { [self] in
            let (known, failure) = await status(of: chain)
            states.withLock { states in
                var state = states[chain.digest] ?? State()
                state.asking = nil
                if let known {
                    state.known = known
                    state.failure = nil
                    state.failedAt = nil
                } else {
                    state.failure = failure
                    state.failedAt = ContinuousClock.now
                }
                states[chain.digest] = state
            }
        }
    }

    /// Whether the leaf or the intermediate names an OCSP responder (read once per chain).
    private static func namesResponders(_ chain: ChainVerifier.VerifiedChain) -> Bool {
        let certificates = chain.path
        guard certificates.count == 3 else { return true }  // asked, and the ask says why it cannot be
        return OCSPQuery(certificate: certificates[0], issuer: certificates[1]) != nil
            || OCSPQuery(certificate: certificates[1], issuer: certificates[2]) != nil
    }

    /// Asks each certificate's responder in turn: the leaf's (issued by the intermediate), then the
    /// intermediate's (issued by the root). A certificate that names no responder has nothing to ask.
    private func status(of chain: ChainVerifier.VerifiedChain) async -> (Known?, Failure?) {
        let now = Date()
        var until = now.addingTimeInterval(settings.maximumAge)
        let certificates = chain.path
        guard certificates.count == 3 else {
            return (nil, Failure(why: "the chain has no root to ask about its intermediate"))
        }
        for (certificate, issuer) in [(certificates[0], certificates[1]), (certificates[1], certificates[2])] {
            guard let query = OCSPQuery(certificate: certificate, issuer: issuer) else { continue }
            let body: Data
            do {
                body = try await fetch(query.url, query.request, settings.timeout)
            } catch {
                let why = "the OCSP responder \(query.url) did not answer: \(error)"
                observer?("unavailable", why)
                return (nil, Failure(why: why, unanswered: true))
            }
            switch query.answer(body, issuer: issuer, roots: roots) {
            case .good(let nextUpdate):
                until = min(until, nextUpdate ?? now.addingTimeInterval(settings.ageWithoutNextUpdate))
            case .revoked:
                let why = "a certificate of the chain is revoked (OCSP, \(query.url))"
                observer?("revoked", why)
                return (.refused(why, until: now.addingTimeInterval(settings.revokedAge)), nil)
            case .unknown:
                // Not yet known to the responder (a new certificate), or not issued by its CA: never a deny on
                // that alone; asked again, and counted (an alert reads it).
                let why = "the OCSP responder \(query.url) does not know a certificate of the chain"
                observer?("unknown", why)
                return (nil, Failure(why: why))
            case .untrusted(let reason):
                let why = "the OCSP responder \(query.url)'s answer is not trusted: \(reason)"
                observer?("untrusted", why)
                return (nil, Failure(why: why))
            }
        }
        observer?("good", nil)
        // A responder whose next update is already due is asked again in a minute, not at every verification.
        return (.good(until: max(until, now.addingTimeInterval(60))), nil)
    }
}
