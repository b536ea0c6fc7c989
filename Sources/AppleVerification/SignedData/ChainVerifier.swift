import Crypto
import Foundation
import Synchronization

/// Verifies a JWS `x5c` chain the way Apple's App Store Server Library does: exactly three certificates,
/// Apple's OIDs on the leaf and the intermediate, a path to one of the configured roots, each certificate
/// valid at the effective date. OpenSSL's strict mode stays off, as in Apple's libraries (Apple's own test
/// root fails it). Revocation is checked online when a ``RevocationChecker`` is given (``checkRevocation(_:)``,
/// once a signature made with the chain verified and the data is this app's, of an environment accepted: the
/// verifier's last check): every chain, also one from the caches, passes its check (a
/// cached answer, most of the time).
///
/// Two caches, each holding only what Apple made, so that nothing an unauthenticated sender posts can evict
/// Apple's chain or fill them:
/// - verified chains, by the SHA-256 of their certificates' DER (not by the header's text, which a sender
///   varies at will around Apple's public chain): a path validated once is not validated again; only a chain
///   that validates to a root gets in, and the least recently used leaves when it is full;
/// - headers whose JWS signature verified (``confirm(header:_:)``): the fast path, a dictionary lookup with
///   no decoding at all. A header enters only once a signature made with its chain verified, so a forged
///   header never does.
/// A forgery carrying Apple's chain in a header of its own costs the header's decoding, a hash and the one
/// signature check that fails: about what a genuine JWS costs, never a path validation.
final class ChainVerifier: Sendable {
    static let leafOID = "1.2.840.113635.100.6.11.1"
    static let intermediateOID = "1.2.840.113635.100.6.2.1"

    /// A chain that validated: its leaf's key and the window in which the whole path is valid.
    struct VerifiedChain: Sendable {
        let key: ECPublicKey
        let validity: ClosedRange<Double>
        let digest: [UInt8]
        /// The validated path's certificates: leaf, intermediate, the configured root it reached.
        let path: [X509Certificate]
    }

    private struct Caches {
        var chains: [[UInt8]: VerifiedChain] = [:]
        /// Digests in `chains`, least recently used first.
        var recency: [[UInt8]] = []
        var headers: [Substring: VerifiedChain] = [:]
    }

    private let roots: [X509Certificate]
    private let caches = Mutex(Caches())
    private let cacheLimit: Int
    /// Chains validated from their certificates (cache misses): what a flood of new chains costs shows here.
    private let validations = Atomic<Int>(0)

    /// How many chains were validated from their certificates since start (each a cache miss).
    var pathValidations: Int { validations.load(ordering: .relaxed) }

    private let revocation: RevocationChecker?

    init(roots: [X509Certificate], cacheLimit: Int, revocation: RevocationChecker? = nil) {
        self.roots = roots
        self.cacheLimit = cacheLimit
        self.revocation = revocation
    }

    /// The chain of a JWS whose header is `header` and whose `x5c` (base64 DER, leaf first) `certificates`
    /// reads, valid at `date` (seconds since the epoch). Call ``confirm(header:_:)`` once the JWS's signature
    /// verified with its key.
    func chain(header: Substring, certificates: () throws(AppleVerificationError) -> [String], at date: Double)
        throws(AppleVerificationError) -> VerifiedChain
    {
        if cacheLimit > 0, let known = caches.withLock({ $0.headers[header] }) {
            return try Self.valid(known, at: date)
        }
        let ders = try Self.decode(try certificates())
        let digest = Self.digest(ders)
        if cacheLimit > 0, let known = caches.withLock({ Self.use(digest, &$0) }) {
            return try Self.valid(known, at: date)
        }
        let verified = try verify(ders, digest: digest, at: date)
        guard cacheLimit > 0 else { return verified }
        caches.withLock { caches in
            if caches.chains[digest] == nil, caches.chains.count >= cacheLimit, !caches.recency.isEmpty {
                caches.chains[caches.recency.removeFirst()] = nil
            }
            if caches.chains.updateValue(verified, forKey: digest) == nil { caches.recency.append(digest) }
        }
        return verified
    }

    /// Throws unless the chain is known not to be revoked (nothing to do without a ``RevocationChecker``). Called
    /// only once a JWS signed with the chain's key verified: nothing a sender makes up ever causes an ask.
    func checkRevocation(_ chain: VerifiedChain) throws(AppleVerificationError) {
        try revocation?.check(chain)
    }

    /// Remembers `header` as Apple's, with its chain: a JWS signed with that chain's key verified under it.
    func confirm(header: Substring, _ chain: VerifiedChain) {
        guard cacheLimit > 0 else { return }
        caches.withLock { caches in
            guard caches.headers[header] == nil else { return }
            if caches.headers.count >= cacheLimit { caches.headers.removeAll(keepingCapacity: true) }
            // A copy of its own: the key must not keep the whole JWS it was cut from alive.
            caches.headers[Substring(String(header))] = chain
        }
    }

    /// The chain of `digest`, if verified before, moved to the most recently used end.
    private static func use(_ digest: [UInt8], _ caches: inout Caches) -> VerifiedChain? {
        guard let known = caches.chains[digest] else { return nil }
        if let index = caches.recency.firstIndex(of: digest), index != caches.recency.count - 1 {
            caches.recency.append(caches.recency.remove(at: index))
        }
        return known
    }

    private static func valid(_ chain: VerifiedChain, at date: Double) throws(AppleVerificationError)
        -> VerifiedChain
    {
        guard chain.validity.contains(date) else {
            throw AppleVerificationError(.invalidChain, "the certificate chain is not valid at the signed date")
        }
        return chain
    }

    private static func decode(_ encoded: [String]) throws(AppleVerificationError) -> [Data] {
        guard encoded.count == 3 else {
            throw AppleVerificationError(.invalidChainLength, "x5c holds \(encoded.count) certificates, not 3")
        }
        var ders: [Data] = []
        for text in encoded {
            guard let der = Data(base64Encoded: text), !der.isEmpty else {
                throw AppleVerificationError(.invalidCertificate, "an x5c certificate is not base64")
            }
            ders.append(der)
        }
        return ders
    }

    /// SHA-256 over the leaf's and the intermediate's length and bytes: the two certificates the path is validated
    /// from (the third of `x5c` is not: the path ends at a configured root), each with one encoding (DER with
    /// nothing after it: ``X509Certificate``), so a sender cannot make one chain look new by varying the rest.
    private static func digest(_ ders: [Data]) -> [UInt8] {
        var input: [UInt8] = []
        input.reserveCapacity(ders.prefix(2).reduce(16) { $0 + $1.count })
        for der in ders.prefix(2) {
            withUnsafeBytes(of: UInt64(der.count).bigEndian) { input.append(contentsOf: $0) }
            input.append(contentsOf: der)
        }
        return SHA256Digest.hash(input)
    }

    private func verify(_ ders: [Data], digest: [UInt8], at date: Double) throws(AppleVerificationError)
        -> VerifiedChain
    {
        validations.add(1, ordering: .relaxed)
        var certificates: [X509Certificate] = []
        for der in ders { certificates.append(try AppleVerificationError.certificate(der)) }
        let leaf = certificates[0]
        let intermediate = certificates[1]
        guard leaf.hasExtension(oid: Self.leafOID) else {
            throw AppleVerificationError(.invalidCertificate, "the leaf certificate lacks Apple's receipt-signing OID")
        }
        guard intermediate.hasExtension(oid: Self.intermediateOID) else {
            throw AppleVerificationError(.invalidCertificate, "the intermediate certificate lacks Apple's WWDR OID")
        }
        let path = try validatePath(leaf: leaf, intermediate: intermediate, at: date)
        let key: ECPublicKey
        do { key = try leaf.publicKey() } catch { throw AppleVerificationError(.invalidCertificate, error.reason) }
        return VerifiedChain(key: key, validity: path.validity, digest: digest, path: path.certificates)
    }
    /// The path from the leaf through the intermediate to a configured root, valid at `date`.
    private func validatePath(leaf: X509Certificate, intermediate: X509Certificate, at date: Double)
        throws(AppleVerificationError) -> CertificatePath
    {
        // `date` comes from the payload, before its signature is checked: a failable conversion, never `time_t(_:)`.
        guard date.isFinite, let time = time_t(exactly: date.rounded(.down)) else {
            throw AppleVerificationError(.invalidChain, "the signed date is not a time a certificate can be checked at")
        }
        let path: CertificatePath
        do {
            path = try CertificatePath(leaf: leaf, intermediates: [intermediate], roots: roots, at: time)
        } catch {
            throw AppleVerificationError(.invalidChain, "certificate chain rejected: \(error.reason)")
        }
        guard path.certificates.count == 3 else {
            throw AppleVerificationError(.invalidChain, "the path is not leaf, intermediate and a configured root")
        }
        return path
    }
}
