/// One OpenSSL object this process made and frees once, when the last Swift owner lets go: a key, a
/// certificate, an OCSP certificate id.
///
/// `@unchecked Sendable`, the one such claim for OpenSSL here: an object wrapped in this is never changed after
/// it is made, and OpenSSL 3 allows concurrent reads of these objects, each use with a context of its own (a
/// signature's or verification's `EVP_MD_CTX`, an OCSP response's check). The types built on it (`ECPublicKey`,
/// `ECPrivateKey`, `X509Certificate`, an OIDC provider's signing key, an OCSP query) are Sendable by the compiler's
/// own check.
package final class OpenSSLObject: @unchecked Sendable {
    package let pointer: OpaquePointer
    private let free: @Sendable (OpaquePointer) -> Void

    /// Takes ownership of `pointer`: `free` (OpenSSL's `…_free` for its type) runs in `deinit`.
    package init(adopting pointer: OpaquePointer, free: @escaping @Sendable (OpaquePointer) -> Void) {
        self.pointer = pointer
        self.free = free
    }

    deinit { free(pointer) }
}
