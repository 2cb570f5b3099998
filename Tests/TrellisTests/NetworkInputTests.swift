import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import Testing
@testable import Trellis

/// What Trellis parses from the network, on inputs the fuzzers found (kept as seeds in
/// `Fuzz/Seeds`).
@Suite("Parsing what servers send")
struct NetworkInputTests {
    @Test func httpDatesInEachFormParse() {
        let expected = Date(timeIntervalSince1970: 784_111_777)  // 1994-11-06 08:49:37 UTC
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == expected)
        #expect(HTTPDate.parse("Thu, 29 Feb 2024 23:59:59 GMT") == Date(timeIntervalSince1970: 1_709_251_199))
        #expect(HTTPDate.parse("Fri, 30 Feb 2024 00:00:00 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 24:00:00 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 PST") == nil)
    }

    @Test func aRetryAfterThatTrappedFoundationsFormatterIsIgnored() throws {
        // The bytes the fuzzer found: DateFormatter on Linux traps on them.
        let bytes: [UInt8] = [0x53, 0xDB, 0x9C, 0xDF, 0xAC, 0x79, 0x2C, 0x2C]
        #expect(RetryAfter.delay(String(decoding: bytes, as: UTF8.self), now: Date()) == nil)
        #expect(RetryAfter.delay("120", now: Date()) == .seconds(120))
        #expect(RetryAfter.delay("99999999999999999999999", now: Date()) == Duration.longest)
    }

    @Test func anEventOfBytesThatAreNotUTF8StaysWithinTheLimitDecoded() {
        // 200 bytes of 0xFF decode to 200 replacement characters, 600 bytes of UTF-8.
        var parser = EventStreamParser(maximumEventSize: 512)
        let stream = Array("data: ".utf8) + [UInt8](repeating: 0xFF, count: 200) + Array("\n\n".utf8)
        #expect(throws: TrellisError.self) { _ = try parser.parse(stream) }
        var roomy = EventStreamParser(maximumEventSize: 1024)
        #expect((try? roomy.parse(stream))?.first?.data.utf8.count == 600)
    }

    /// Naming the status of an upload's early answer keeps what the failure was.
    @Test func aFailureNamedAfterAnUploadsAnswerStaysAProtocolViolation() {
        var failure = ConnectionFailure(host: "h", reason: "the server's answer is not a valid HTTP/1.1 response")
        failure.isProtocolViolation = true
        let named = AsyncHTTPClientTransport.answeredDuringUpload(failure, status: .payloadTooLarge)
        #expect(named.reason.contains("413"))
        #expect(named.isProtocolViolation)
    }

    /// SwiftNIO's "I/O on closed channel", met when a request is to go out on a pooled
    /// connection that closed just then (after a stray response from the server, say), is a
    /// stale connection's break: the request goes out again on a new connection.
    @Test func aConnectionFoundClosedCountsAsStale() throws {
        let request = try Request(method: .get, url: URL(string: "http://127.0.0.1:1/x")!)
        let error = TransportErrors.translate(ChannelError.ioOnClosedChannel, host: "127.0.0.1:1", timeout: .seconds(1), request: request)
        guard case TrellisError.connectionFailed(let failure) = error else {
            Issue.record("expected connectionFailed, got \(error)")
            return
        }
        #expect(failure.mayBeStaleConnection)
        #expect(failure.reason.contains("closed under the request"))
    }

    @Test func aResponseHasOneSureBodyLengthOrNone() {
        func fault(_ fields: HTTPFields) -> String? {
            URLSessionTransport.framingFault(of: HTTPResponse(status: .ok, headerFields: fields))
        }
        #expect(fault([:]) == nil)
        #expect(fault([.contentLength: "5"]) == nil)
        #expect(fault([.contentLength: "0"]) == nil)
        #expect(fault([.contentLength: "5, 5"]) == nil)
        #expect(fault([.transferEncoding: "chunked"]) == nil)
        for refused in ["3, 5", "-1", "", "5,", "0x10", "+5", "99999999999999999999"] {
            #expect(fault([.contentLength: refused]) != nil, "\(refused)")
        }
        #expect(fault([.contentLength: "3", .transferEncoding: "chunked"]) != nil)
    }
}
