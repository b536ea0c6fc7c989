/// Why a cryptographic object could not be read or used. For people: it never repeats a key or a secret. A layer
/// above (Apple's verification, the desk's sign-in) turns it into its own error.
public struct CryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// A certificate that cannot be parsed or used.
        case certificate
        /// A key that cannot be parsed or used; a signature that cannot be made.
        case key
        /// A certificate path that does not validate.
        case path
    }

    public let kind: Kind
    public let reason: String

    package init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    public var description: String { reason }
}
