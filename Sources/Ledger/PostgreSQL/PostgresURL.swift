/// A libpq connection URI's query parameters, read and added as text: the URL itself (its password among them)
/// is never parsed into parts that could end up in an error.
public enum PostgresURL {
    /// The names of the parameters the URL's query gives.
    public static func parameterNames(_ url: String) -> Set<String> {
        let query = url.firstIndex(of: "?").map { url[url.index(after: $0)...] } ?? ""
        return Set(query.split(separator: "&").compactMap { $0.split(separator: "=").first.map(String.init) })
    }

    /// `url` with `parameters` (names and values as written) after its own.
    public static func appending(_ parameters: [(String, String)], to url: String) -> String {
        guard !parameters.isEmpty else { return url }
        return url + (url.contains("?") ? "&" : "?") + parameters.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }
}
