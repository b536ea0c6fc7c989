import COpenSSL

/// OpenSSL 3's SHA-256 implementation, fetched once for the process. The one-shot `SHA256()` looks the algorithm up
/// in the provider store at every use (a lock, a copied name, a context allocated): more than the hash of a short
/// text itself costs, so ``SHA256Digest`` hashes with this. HMAC, signing and verifying take it too, as the method
/// they name, though OpenSSL's providers look it up again by name inside them. `nonisolated(unsafe)`: a fetched
/// method is immutable, reference-counted by OpenSSL's own atomics, and may be used from any thread; it is never
/// freed.
enum SHA256Method {
    nonisolated(unsafe) static let fetched: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil) ?? EVP_sha256()
}
