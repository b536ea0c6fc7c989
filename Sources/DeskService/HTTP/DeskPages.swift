import Vocabulary
import Foundation
import HTTPServerKit

/// The headers of every answer of the desk: a strict Content-Security-Policy (the console's own script and style,
/// nothing inline, nothing from elsewhere, never framed), no sniffing, no referrer, nothing cached.
enum DeskHeaders {
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self';"
        + " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    static let common: [(String, String)] = [
        ("Content-Security-Policy", contentSecurityPolicy), ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"), ("Cache-Control", "no-store"), ("X-Frame-Options", "DENY"),
        ("Cross-Origin-Opener-Policy", "same-origin"), ("Cross-Origin-Resource-Policy", "same-origin"),
    ]
}

/// The desk's replies that are not an action's answer: the console's files, errors, and the sign-in's pages.
enum DeskPages {
    static func asset(_ text: String, type: String) -> ServerReply {
        .respond(
            status: 200, headers: [("Content-Type", type)] + DeskHeaders.common, body: Data(text.utf8), after: .zero)
    }

    static func json(_ status: Int, _ object: JSONValue) -> ServerReply {
        .respond(
            status: status, headers: [("Content-Type", "application/json")] + DeskHeaders.common, body: object.data,
            after: .zero)
    }

    /// A small page that says what happened (the texts are the desk's own, never the request's).
    static func message(
        _ status: Int, title: String, text: String, link: (href: String, label: String), headers: [(String, String)]
    ) -> ServerReply {
        let page = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>\(escape(title))</title>
            <link rel="stylesheet" href="/desk/console.css"></head>
            <body><main><h1>\(escape(title))</h1><p id="message">\(escape(text))</p>
            <p><a id="again" href="\(escape(link.href))">\(escape(link.label))</a></p></main></body></html>
            """
        return .respond(
            status: status, headers: [("Content-Type", "text/html; charset=utf-8")] + headers + DeskHeaders.common,
            body: Data(page.utf8), after: .zero)
    }

    static func escape(_ text: String) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }
}
