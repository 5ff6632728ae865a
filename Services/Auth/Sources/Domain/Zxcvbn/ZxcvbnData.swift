import Foundation

/// The frequency lists and keyboard adjacency graphs of zxcvbn (MIT, Dropbox; from the
/// `zxcvbn` 4.5.0 package on PyPI), shipped as resources of the auth target.
package struct ZxcvbnData: Sendable {
    /// In the reference's order: the order decides ties between equally good matches.
    package let rankedDictionaries: [(name: String, ranks: [String: Int])]
    package let graphs: [(name: String, adjacency: [Unicode.Scalar: [[Unicode.Scalar]?]])]
    package let keyboardAverageDegree: Double
    package let keypadAverageDegree: Double
    package let keyboardStartingPositions: Int
    package let keypadStartingPositions: Int

    package static func load(bundle: Bundle) throws -> ZxcvbnData {
        guard let dir = bundle.url(forResource: "zxcvbn", withExtension: nil) else {
            throw CocoaError(.fileNoSuchFile)
        }
        struct Lists: Decodable {
            var order: [String]
            var lists: [String: [String]]
        }
        struct Graphs: Decodable {
            var order: [String]
            var graphs: [String: [[Entry]]]
            enum Entry: Decodable {
                case key(String)
                case neighbors([String?])
                init(from decoder: any Decoder) throws {
                    let c = try decoder.singleValueContainer()
                    if let s = try? c.decode(String.self) { self = .key(s) } else { self = .neighbors(try c.decode([String?].self)) }
                }
            }
        }
        let lists = try JSONDecoder().decode(Lists.self, from: Data(contentsOf: dir.appendingPathComponent("frequency_lists.json")))
        let graphs = try JSONDecoder().decode(Graphs.self, from: Data(contentsOf: dir.appendingPathComponent("adjacency_graphs.json")))
        var ranked: [(String, [String: Int])] = []
        for name in lists.order {
            var d: [String: Int] = [:]
            d.reserveCapacity(lists.lists[name]!.count)
            for (i, w) in lists.lists[name]!.enumerated() { d[w] = i + 1 }  // a later duplicate wins, as in a Python dict comprehension
            ranked.append((name, d))
        }
        var parsed: [(String, [Unicode.Scalar: [[Unicode.Scalar]?]])] = []
        var degrees: [String: Double] = [:]
        var positions: [String: Int] = [:]
        for name in graphs.order {
            var adjacency: [Unicode.Scalar: [[Unicode.Scalar]?]] = [:]
            var total = 0
            for pair in graphs.graphs[name]! {
                guard case .key(let k) = pair[0], case .neighbors(let n) = pair[1], let key = k.unicodeScalars.first else { continue }
                adjacency[key] = n.map { $0.map { Array($0.unicodeScalars) } }
                total += n.compactMap { $0 }.count
            }
            degrees[name] = Double(total) / Double(adjacency.count)
            positions[name] = adjacency.count
            parsed.append((name, adjacency))
        }
        return ZxcvbnData(
            rankedDictionaries: ranked,
            graphs: parsed,
            keyboardAverageDegree: degrees["qwerty"]!,
            keypadAverageDegree: degrees["keypad"]!,
            keyboardStartingPositions: positions["qwerty"]!,
            keypadStartingPositions: positions["keypad"]!
        )
    }
}
