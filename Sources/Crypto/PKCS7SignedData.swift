import COpenSSL
package import Foundation

/// A PKCS#7 signed-data container (an app receipt's shape), parsed once and read, never changed.
package final class PKCS7SignedData {
    private let container: UnsafeMutablePointer<PKCS7>

    /// Nil for anything OpenSSL does not read as PKCS#7 (BER, indefinite lengths included: Xcode's receipts).
    package init?(der: Data) {
        let parsed = der.withUnsafeBytes { raw in
            var cursor = raw.bindMemory(to: UInt8.self).baseAddress
            return d2i_PKCS7(nil, &cursor, raw.count)
        }
        guard let parsed else {
            ERR_clear_error()
            return nil
        }
        container = parsed
    }

    deinit { PKCS7_free(container) }

    /// The signed content, when it is data (id-data, non-empty).
    package var content: [UInt8]? {
        // `d` is a union read by the type each level declares: check the type before reading a member, and
        // the length before making a buffer of it (a negative count traps).
        guard OBJ_obj2nid(container.pointee.type) == NID_pkcs7_signed, let sign = container.pointee.d.sign,
            let contents = sign.pointee.contents, OBJ_obj2nid(contents.pointee.type) == NID_pkcs7_data,
            let data = contents.pointee.d.data, let bytes = data.pointee.data, data.pointee.length > 0
        else { return nil }
        return Array(UnsafeBufferPointer(start: bytes, count: Int(data.pointee.length)))
    }

    /// The signers' certificates, each found among the container's own (a signer without its certificate is not
    /// listed: nil when any is missing).
    package var signers: [X509Certificate]? {
        guard OBJ_obj2nid(container.pointee.type) == NID_pkcs7_signed,
            let stack = PKCS7_get0_signers(container, nil, 0)
        else {
            ERR_clear_error()
            return nil
        }
        defer { OPENSSL_sk_free(stack) }  // a new stack of certificates the container owns
        return (0..<max(0, OPENSSL_sk_num(stack))).compactMap { index in
            OPENSSL_sk_value(stack, index).map { X509Certificate(sharing: OpaquePointer($0)) }
        }
    }

    /// Every certificate the container carries (the signer's and its intermediates).
    package var certificates: [X509Certificate] {
        guard OBJ_obj2nid(container.pointee.type) == NID_pkcs7_signed,
            let stack = container.pointee.d.sign?.pointee.cert
        else { return [] }
        return (0..<max(0, OPENSSL_sk_num(stack))).compactMap { index in
            OPENSSL_sk_value(stack, index).map { X509Certificate(sharing: OpaquePointer($0)) }
        }
    }

    /// Whether the signature over the content verifies with the signer certificate's key. The signer's path is
    /// not checked here: validate it with ``CertificatePath`` first.
    package var signatureVerifies: Bool {
        guard let store = X509_STORE_new() else { return false }
        defer {
            X509_STORE_free(store)
            ERR_clear_error()
        }
        return PKCS7_verify(container, nil, store, nil, nil, Int32(PKCS7_NOVERIFY)) == 1
    }

    /// Whether the container's signer chains to one of `roots` and its signature verifies (`checkTime` false: the
    /// certificates' validity dates are ignored).
    package func verifies(roots: [X509Certificate], checkTime: Bool) -> Bool {
        guard let store = X509_STORE_new() else { return false }
        defer {
            X509_STORE_free(store)
            ERR_clear_error()
        }
        for root in roots { X509_STORE_add_cert(store, root.pointer) }
        if !checkTime { X509_STORE_set_flags(store, UInt(X509_V_FLAG_NO_CHECK_TIME)) }
        return PKCS7_verify(container, nil, store, nil, nil, 0) == 1
    }
}
