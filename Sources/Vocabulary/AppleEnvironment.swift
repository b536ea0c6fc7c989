/// The App Store environment a purchase was made in. Open: a value Apple adds later still decodes.
public struct AppleEnvironment: Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let production = AppleEnvironment(rawValue: "Production")
    public static let sandbox = AppleEnvironment(rawValue: "Sandbox")
    public static let xcode = AppleEnvironment(rawValue: "Xcode")
    public static let localTesting = AppleEnvironment(rawValue: "LocalTesting")

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }
}
