import COpenSSL
package import Foundation

/// Owns an OpenSSL `EVP_PKEY` holding a P-256 private key (an App Store Connect .p8 key, or a test key). Signs
/// from any number of threads at once (each signature has its own context).
public final class ECPrivateKey: Sendable {
    private let key: OpenSSLObject
    package var pointer: OpaquePointer { key.pointer }

    /// Reads PEM: PKCS#8 `PRIVATE KEY` (.p8) or SEC1 `EC PRIVATE KEY`. The error never repeats the key.
    public init(pem: String) throws(CryptoError) {
        let key: OpaquePointer? = pem.withCString { text in
            let bio = BIO_new_mem_buf(text, -1)
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let key, EVP_PKEY_get_base_id(key) == EVP_PKEY_EC else {
            ERR_clear_error()
            throw CryptoError(.key, "not a PEM elliptic-curve private key")
        }
        self.key = OpenSSLObject(adopting: key, free: { EVP_PKEY_free($0) })
    }

    /// An ES256 signature of `message`, JWS-style raw r‖s (64 bytes).
    package func signES256(_ message: some DataProtocol) throws(CryptoError) -> [UInt8] {
        let bytes = [UInt8](message)
        guard let context = EVP_MD_CTX_new() else { throw CryptoError(.key, "out of memory") }
        defer { EVP_MD_CTX_free(context) }
        var length = 0
        var der = [UInt8](repeating: 0, count: 80)
        let signed =
            EVP_DigestSignInit(context, nil, SHA256Method.fetched, nil, pointer) == 1
            && der.withUnsafeMutableBufferPointer { out in
                length = out.count
                return EVP_DigestSign(context, out.baseAddress, &length, bytes, bytes.count) == 1
            }
        guard signed, let raw = ES256Signature.raw(fromDER: Array(der.prefix(length))) else {
            ERR_clear_error()
            throw CryptoError(.key, "signing failed")
        }
        return raw
    }

    /// The matching public key.
    package func publicKey() throws(CryptoError) -> ECPublicKey {
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError(.key, "out of memory") }
        defer { BIO_free(bio) }
        PEM_write_bio_PUBKEY(bio, pointer)
        return try ECPublicKey(pem: Self.drain(bio))
    }

    static func drain(_ bio: OpaquePointer) -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while true {
            let read = BIO_read(bio, &chunk, Int32(chunk.count))
            if read <= 0 { break }
            bytes += chunk.prefix(Int(read))
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
