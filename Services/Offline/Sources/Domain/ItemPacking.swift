import CZlib
import Crypto
import Foundation
import ServiceCore

/// How an item is stored in the user's offline copy and served to the app: the JSON bytes,
/// gzip-compressed above 10 KB, with the SHA-256 of the uncompressed bytes so the app can
/// verify what it unpacked.
package struct PackedItem: Sendable, Equatable {
    package var data: Data
    package var compressed: Bool
    package var checksum: String
    package var sizeBytes: Int

    package static func pack(_ json: Data) throws -> PackedItem {
        let checksum = SHA256.hash(data: json).hexEncoded
        if json.count > OfflineRules.compressAbove {
            return PackedItem(data: try Gzip.compress(json), compressed: true, checksum: checksum, sizeBytes: json.count)
        }
        return PackedItem(data: json, compressed: false, checksum: checksum, sizeBytes: json.count)
    }
}

package enum Gzip {
    package enum GzipError: Error { case zlib(Int32) }

    /// RFC 1952 gzip (zlib with a 31-bit window).
    package static func compress(_ input: Data) throws -> Data {
        var stream = z_stream()
        var status = deflateInit2_(
            &stream,
            Z_BEST_COMPRESSION,
            Z_DEFLATED,
            15 + 16,
            8,
            Z_DEFAULT_STRATEGY,
            ZLIB_VERSION,
            Int32(MemoryLayout<z_stream>.size)
        )
        guard status == Z_OK else { throw GzipError.zlib(status) }
        defer { deflateEnd(&stream) }
        var output = Data(count: Int(deflateBound(&stream, uLong(input.count))) + 32)
        let written: Int = try input.withUnsafeBytes { (inBuf: UnsafeRawBufferPointer) -> Int in
            try output.withUnsafeMutableBytes { (outBuf: UnsafeMutableRawBufferPointer) -> Int in
                stream.next_in = UnsafeMutablePointer(mutating: inBuf.bindMemory(to: Bytef.self).baseAddress)
                stream.avail_in = uInt(inBuf.count)
                stream.next_out = outBuf.bindMemory(to: Bytef.self).baseAddress
                stream.avail_out = uInt(outBuf.count)
                status = deflate(&stream, Z_FINISH)
                guard status == Z_STREAM_END else { throw GzipError.zlib(status) }
                return Int(stream.total_out)
            }
        }
        return output.prefix(written)
    }

    package static func decompress(_ input: Data) throws -> Data {
        var stream = z_stream()
        var status = inflateInit2_(&stream, 15 + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        guard status == Z_OK else { throw GzipError.zlib(status) }
        defer { inflateEnd(&stream) }
        var out = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        try input.withUnsafeBytes { (inBuf: UnsafeRawBufferPointer) in
            stream.next_in = UnsafeMutablePointer(mutating: inBuf.bindMemory(to: Bytef.self).baseAddress)
            stream.avail_in = uInt(inBuf.count)
            repeat {
                let produced: Int = chunk.withUnsafeMutableBytes { c in
                    stream.next_out = c.bindMemory(to: Bytef.self).baseAddress
                    stream.avail_out = uInt(c.count)
                    status = inflate(&stream, Z_NO_FLUSH)
                    return c.count - Int(stream.avail_out)
                }
                guard status == Z_OK || status == Z_STREAM_END else { throw GzipError.zlib(status) }
                out.append(contentsOf: chunk.prefix(produced))
            } while status != Z_STREAM_END
        }
        return out
    }
}
