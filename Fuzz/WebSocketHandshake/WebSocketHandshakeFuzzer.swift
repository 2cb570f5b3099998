// libFuzzer harness: a server's answer to a WebSocket upgrade, as bytes; `{accept}` in it is
// replaced by the right `Sec-WebSocket-Accept` for the key the client sent, so that accepted
// upgrades are reached too. The first byte seeds how the answer is split into reads. Checks
// that the handshake never crashes, always ends in exactly one outcome (upgraded, refused or
// failed) once the connection closes, and ends in the same one whatever the split; that it
// upgrades only on a 101 carrying the right accept value; and that it refuses only what parses
// as another status.
import Crypto
import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
@testable import Trellis

private final class Outcomes {
    var list: [String] = []
}

/// The outcomes of one handshake fed `answer` in reads of `sizes` (cycled), and the accept
/// value the client expected.
private func handshake(_ answer: [UInt8], sizes: [Int]) -> (outcomes: [String], accept: String) {
    let outcomes = Outcomes()
    let channel = EmbeddedChannel()
    let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/socket", headers: ["Host": "fuzz.test"])
    let handler = WebSocketHandshake(
        head: head,
        maximumFrameSize: 1 << 16,
        upgraded: { _ in outcomes.list.append("upgraded") },
        refused: { _ in outcomes.list.append("refused") },
        failed: { _ in outcomes.list.append("failed") }
    )
    do {
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    } catch {
        fatalError("the harness could not set up the channel: \(error)")
    }
    let request = (try? channel.readOutbound(as: ByteBuffer.self)).flatMap { $0.map { String(buffer: $0) } } ?? ""
    let key = request.split(separator: "\r\n").first { $0.hasPrefix("Sec-WebSocket-Key: ") }?.dropFirst("Sec-WebSocket-Key: ".count) ?? ""
    let accept = Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
    let bytes = Array(String(decoding: answer, as: UTF8.self).replacingOccurrences(of: "{accept}", with: accept).utf8)
    var start = 0
    var turn = 0
    while start < bytes.count, channel.isActive {
        let end = min(start + sizes[turn % sizes.count], bytes.count)
        turn += 1
        _ = try? channel.writeInbound(ByteBuffer(bytes: bytes[start..<end]))
        start = end
    }
    // Closing runs channelInactive (a handshake still waiting then fails), and finishing
    // drops what the channel holds.
    _ = try? channel.finish(acceptAlreadyClosed: true)
    return (outcomes.list, accept)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebSocketHandshake(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard let seed = input.first else { return 0 }
    let answer = Array(input.dropFirst())
    let whole = handshake(answer, sizes: [Int.max])
    let split = handshake(answer, sizes: [1 + Int(seed % 5), 1 + Int(seed / 5 % 11)])
    check(whole.outcomes.count == 1, "the handshake ended in \(whole.outcomes)")
    check(whole.outcomes == split.outcomes, "whole: \(whole.outcomes), split: \(split.outcomes)")

    // The head as the handshake reads it: up to the first CRLF CRLF of the bytes (a search in
    // the decoded text would also match across combining marks).
    let bytes = Array(String(decoding: answer, as: UTF8.self).replacingOccurrences(of: "{accept}", with: whole.accept).utf8)
    let headEnd = bytes.firstRange(of: [13, 10, 13, 10])?.upperBound
    let parsed = headEnd.flatMap { WebSocketHandshake.parse(String(decoding: bytes[..<$0], as: UTF8.self)) }
    switch whole.outcomes.first {
    case "upgraded":
        check(parsed?.status.code == 101, "upgraded on \(String(describing: parsed?.status))")
        check(parsed?.headerFields[.secWebSocketAccept] == whole.accept, "upgraded without the right accept value")
    case "refused":
        check(parsed.map { $0.status.code != 101 } ?? false, "refused what is not a non-101 response")
    default:
        break
    }
    return 0
}

@_cdecl("fuzz_websocket_handshake_main")
public func fuzzerMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    runFuzzer(argc, argv) { data, size in fuzzWebSocketHandshake(data.map(UnsafeRawPointer.init), size) }
}
