import Foundation

/// One pattern found in a password (a port of zxcvbn's match dictionaries).
package struct ZMatch {
    package enum Pattern: Equatable { case dictionary, spatial, `repeat`, sequence, regex, date, bruteforce }
    package var pattern: Pattern
    package var i: Int
    package var j: Int
    package var token: [Unicode.Scalar]
    // dictionary
    package var matchedWord = ""
    package var rank = 0
    package var reversed = false
    package var l33t = false
    package var sub: [(Unicode.Scalar, Unicode.Scalar)] = []
    // spatial
    package var graph = ""
    package var turns = 0
    package var shiftedCount = 0
    // repeat
    package var baseGuesses: Double = 0
    package var repeatCount: Double = 0
    // sequence
    package var ascending = true
    // regex (recent_year) and date
    package var year = 0
    package var separator = ""
    /// Filled in by scoring, once per password.
    package var guesses: Double?
}

extension Unicode.Scalar {
    package var isASCIIDigit: Bool { ("0"..."9").contains(self) }
    package var isASCIIUpper: Bool { ("A"..."Z").contains(self) }
    package var isASCIILower: Bool { ("a"..."z").contains(self) }
    /// Python's `str.lower()` per code point, keeping one scalar per scalar.
    package var lowered: Unicode.Scalar {
        if isASCII { return isASCIIUpper ? Unicode.Scalar(value + 32)! : self }
        let l = String(self).lowercased().unicodeScalars
        return l.count == 1 ? l.first! : self
    }
    package var pyIsUpper: Bool { properties.isUppercase }
    package var pyIsLower: Bool { properties.isLowercase }
}

package struct ZxcvbnMatcher {
    package let data: ZxcvbnData

    package static let l33tTable: [(Unicode.Scalar, [Unicode.Scalar])] = [
        ("a", ["4", "@"]), ("b", ["8"]), ("c", ["(", "{", "[", "<"]), ("e", ["3"]), ("g", ["6", "9"]),
        ("i", ["1", "!", "|"]), ("l", ["1", "|", "7"]), ("o", ["0"]), ("s", ["$", "5"]), ("t", ["+", "7"]),
        ("x", ["%"]), ("z", ["2"]),
    ]

    package static let dateSplits: [Int: [(Int, Int)]] = [
        4: [(1, 2), (2, 3)], 5: [(1, 3), (2, 3)], 6: [(1, 2), (2, 4), (4, 5)],
        7: [(1, 3), (2, 3), (4, 5), (4, 6)], 8: [(2, 4), (4, 6)],
    ]

    package static func sortByIJ(_ m: [ZMatch]) -> [ZMatch] {
        // Python's sort is stable: equal (i, j) keep their order.
        m.enumerated().sorted { a, b in
            (a.element.i, a.element.j, a.offset) < (b.element.i, b.element.j, b.offset)
        }.map(\.element)
    }

    package func omnimatch(_ password: [Unicode.Scalar], dictionaries: [(name: String, ranks: [String: Int])]) -> [ZMatch] {
        var matches: [ZMatch] = []
        matches += dictionaryMatch(password, dictionaries)
        matches += reverseDictionaryMatch(password, dictionaries)
        matches += l33tMatch(password, dictionaries)
        matches += spatialMatch(password)
        matches += repeatMatch(password, dictionaries)
        matches += sequenceMatch(password)
        matches += regexMatch(password)
        matches += dateMatch(password)
        return Self.sortByIJ(matches)
    }

    package func dictionaryMatch(_ password: [Unicode.Scalar], _ dictionaries: [(name: String, ranks: [String: Int])]) -> [ZMatch] {
        var matches: [ZMatch] = []
        let n = password.count
        let lower = password.map(\.lowered)
        for (_, ranks) in dictionaries {
            for i in 0..<n {
                var word = String.UnicodeScalarView()
                for j in i..<n {
                    word.append(lower[j])
                    let w = String(word)
                    if let rank = ranks[w] {
                        var m = ZMatch(pattern: .dictionary, i: i, j: j, token: Array(password[i...j]))
                        m.matchedWord = w
                        m.rank = rank
                        matches.append(m)
                    }
                }
            }
        }
        return Self.sortByIJ(matches)
    }

    package func reverseDictionaryMatch(_ password: [Unicode.Scalar], _ dictionaries: [(name: String, ranks: [String: Int])]) -> [ZMatch] {
        let n = password.count
        var matches = dictionaryMatch(Array(password.reversed()), dictionaries)
        for k in matches.indices {
            matches[k].token = Array(matches[k].token.reversed())
            matches[k].reversed = true
            (matches[k].i, matches[k].j) = (n - 1 - matches[k].j, n - 1 - matches[k].i)
        }
        return Self.sortByIJ(matches)
    }

    package static func relevantL33tSubtable(_ password: [Unicode.Scalar]) -> [(Unicode.Scalar, [Unicode.Scalar])] {
        let chars = Set(password)
        return l33tTable.compactMap { letter, subs in
            let relevant = subs.filter { chars.contains($0) }
            return relevant.isEmpty ? nil : (letter, relevant)
        }
    }

    /// Every consistent assignment of l33t characters to letters (zxcvbn's enumerate_l33t_subs).
    package static func enumerateL33tSubs(_ table: [(Unicode.Scalar, [Unicode.Scalar])]) -> [[(Unicode.Scalar, Unicode.Scalar)]] {
        typealias Sub = [(Unicode.Scalar, Unicode.Scalar)]  // (l33t char, letter)
        func dedup(_ subs: [Sub]) -> [Sub] {
            var seen = Set<String>()
            var out: [Sub] = []
            for sub in subs {
                let label = sub.map { (k: String($0.1), v: String($0.0)) }
                    .sorted { ($0.k, $0.v) < ($1.k, $1.v) }
                    .map { "\($0.k),\($0.v)" }.joined(separator: "-")
                if seen.insert(label).inserted { out.append(sub) }
            }
            return out
        }
        var subs: [Sub] = [[]]
        for (firstKey, l33tChars) in table {
            var next: [Sub] = []
            for l33tChr in l33tChars {
                for sub in subs {
                    if let dup = sub.firstIndex(where: { $0.0 == l33tChr }) {
                        var alternative = sub
                        alternative.remove(at: dup)
                        alternative.append((l33tChr, firstKey))
                        next.append(sub)
                        next.append(alternative)
                    } else {
                        next.append(sub + [(l33tChr, firstKey)])
                    }
                }
            }
            subs = dedup(next)
        }
        // Python turns each into a dict: a later pair for the same l33t char wins, order of first insertion kept.
        return subs.map { sub in
            var order: [Unicode.Scalar] = []
            var map: [Unicode.Scalar: Unicode.Scalar] = [:]
            for (l, c) in sub {
                if map[l] == nil { order.append(l) }
                map[l] = c
            }
            return order.map { ($0, map[$0]!) }
        }
    }

    package func l33tMatch(_ password: [Unicode.Scalar], _ dictionaries: [(name: String, ranks: [String: Int])]) -> [ZMatch] {
        var matches: [ZMatch] = []
        for sub in Self.enumerateL33tSubs(Self.relevantL33tSubtable(password)) {
            if sub.isEmpty { break }
            let map = Dictionary(sub, uniquingKeysWith: { $1 })
            let subbed = password.map { map[$0] ?? $0 }
            for var m in dictionaryMatch(subbed, dictionaries) {
                let token = Array(password[m.i...m.j])
                if String(String.UnicodeScalarView(token.map(\.lowered))) == m.matchedWord { continue }
                let tokenSet = Set(token)
                m.l33t = true
                m.token = token
                m.sub = sub.filter { tokenSet.contains($0.0) }
                matches.append(m)
            }
        }
        return Self.sortByIJ(matches.filter { $0.token.count > 1 })
    }

    // MARK: spatial

    package static let shifted: Set<Unicode.Scalar> = Set("~!@#$%^&*()_+QWERTYUIOP{}|ASDFGHJKL:\"ZXCVBNM<>?".unicodeScalars)

    package func spatialMatch(_ password: [Unicode.Scalar]) -> [ZMatch] {
        var matches: [ZMatch] = []
        for (name, graph) in data.graphs { matches += spatialHelper(password, graph, name) }
        return Self.sortByIJ(matches)
    }

    package func spatialHelper(_ password: [Unicode.Scalar], _ graph: [Unicode.Scalar: [[Unicode.Scalar]?]], _ name: String) -> [ZMatch] {
        var matches: [ZMatch] = []
        var i = 0
        while i < password.count - 1 {
            var j = i + 1
            var lastDirection: Int? = nil
            var turns = 0
            var shiftedCount = (name == "qwerty" || name == "dvorak") && Self.shifted.contains(password[i]) ? 1 : 0
            while true {
                let prev = password[j - 1]
                var found = false
                var foundDirection = -1
                var curDirection = -1
                let adjacents = graph[prev] ?? []
                if j < password.count {
                    let cur = password[j]
                    for adj in adjacents {
                        curDirection += 1
                        if let adj, let idx = adj.firstIndex(of: cur) {
                            found = true
                            foundDirection = curDirection
                            if idx == 1 { shiftedCount += 1 }
                            if lastDirection != foundDirection {
                                turns += 1
                                lastDirection = foundDirection
                            }
                            break
                        }
                    }
                }
                if found {
                    j += 1
                } else {
                    if j - i > 2 {
                        var m = ZMatch(pattern: .spatial, i: i, j: j - 1, token: Array(password[i..<j]))
                        m.graph = name
                        m.turns = turns
                        m.shiftedCount = shiftedCount
                        matches.append(m)
                    }
                    i = j
                    break
                }
            }
        }
        return matches
    }

    // MARK: repeat

    /// The shortest base that repeats at least twice starting at `s`, or nil (regex `(.+?)\1+`).
    package static func repeats(_ p: [Unicode.Scalar], at s: Int, length L: Int) -> Bool {
        guard s + 2 * L <= p.count else { return false }
        for k in 0..<L where p[s + k] != p[s + L + k] { return false }
        return true
    }

    package static func extent(_ p: [Unicode.Scalar], at s: Int, length L: Int) -> Int {
        var reps = 1
        while s + (reps + 1) * L <= p.count && (0..<L).allSatisfy({ p[s + $0] == p[s + reps * L + $0] }) { reps += 1 }
        return reps * L
    }

    package func repeatMatch(_ password: [Unicode.Scalar], _ dictionaries: [(name: String, ranks: [String: Int])]) -> [ZMatch] {
        var matches: [ZMatch] = []
        var last = 0
        let n = password.count
        while last < n {
            // Leftmost start with any repetition (same for greedy and lazy).
            var start: Int? = nil
            search: for s in last..<n {
                for L in 1...max(1, (n - s) / 2) where Self.repeats(password, at: s, length: L) {
                    start = s
                    break search
                }
            }
            guard let s = start else { break }
            let lengths = (1...((n - s) / 2)).filter { Self.repeats(password, at: s, length: $0) }
            // Greedy (.+)\1+: the longest base that repeats, repeated as far as it goes.
            let greedyL = lengths.max()!
            let greedyLen = Self.extent(password, at: s, length: greedyL)
            // Lazy (.+?)\1+: the shortest base.
            let lazyL = lengths.min()!
            let lazyLen = Self.extent(password, at: s, length: lazyL)
            let matchLen: Int
            let base: [Unicode.Scalar]
            if greedyLen > lazyLen {
                matchLen = greedyLen
                let token = Array(password[s..<(s + greedyLen)])
                // ^(.+?)\1+$ on the greedy match: its shortest period that tiles it.
                let period = (1...(greedyLen / 2)).first { L in greedyLen % L == 0 && Self.extent(token, at: 0, length: L) == greedyLen }!
                base = Array(token[0..<period])
            } else {
                matchLen = lazyLen
                base = Array(password[s..<(s + lazyL)])
            }
            let analysis = ZxcvbnScoring(data: data).mostGuessableMatchSequence(base, omnimatch(base, dictionaries: dictionaries))
            var m = ZMatch(pattern: .repeat, i: s, j: s + matchLen - 1, token: Array(password[s..<(s + matchLen)]))
            m.baseGuesses = analysis.guesses
            m.repeatCount = Double(matchLen) / Double(base.count)
            matches.append(m)
            last = s + matchLen
        }
        return matches
    }

    // MARK: sequence

    package func sequenceMatch(_ password: [Unicode.Scalar]) -> [ZMatch] {
        if password.count == 1 { return [] }
        var result: [ZMatch] = []
        func update(_ i: Int, _ j: Int, _ delta: Int?) {
            guard let delta else { return }
            if j - i > 1 || abs(delta) == 1 {
                if 0 < abs(delta) && abs(delta) <= 5 {
                    var m = ZMatch(pattern: .sequence, i: i, j: j, token: Array(password[i...j]))
                    m.ascending = delta > 0
                    result.append(m)
                }
            }
        }
        var i = 0
        var lastDelta: Int? = nil
        for k in 1..<password.count {
            let delta = Int(password[k].value) - Int(password[k - 1].value)
            if lastDelta == nil { lastDelta = delta }
            if delta == lastDelta { continue }
            let j = k - 1
            update(i, j, lastDelta)
            i = j
            lastDelta = delta
        }
        update(i, password.count - 1, lastDelta)
        return result
    }

    // MARK: regex (recent_year: 19\d\d|200\d|201\d)

    package func regexMatch(_ password: [Unicode.Scalar]) -> [ZMatch] {
        var matches: [ZMatch] = []
        var k = 0
        while k + 4 <= password.count {
            let t = password[k..<(k + 4)]
            let d = t.map(\.isASCIIDigit)
            let ok =
                (t[k] == "1" && t[k + 1] == "9" && d[2] && d[3])
                || (t[k] == "2" && t[k + 1] == "0" && t[k + 2] == "0" && d[3])
                || (t[k] == "2" && t[k + 1] == "0" && t[k + 2] == "1" && d[3])
            if ok {
                var m = ZMatch(pattern: .regex, i: k, j: k + 3, token: Array(t))
                m.year = Int(String(String.UnicodeScalarView(t)))!
                matches.append(m)
                k += 4
            } else {
                k += 1
            }
        }
        return Self.sortByIJ(matches)
    }

    // MARK: date

    package static func digitsValue(_ s: ArraySlice<Unicode.Scalar>) -> Int {
        s.reduce(0) { $0 * 10 + Int($1.value - 48) }
    }

    package func dateMatch(_ password: [Unicode.Scalar]) -> [ZMatch] {
        var matches: [ZMatch] = []
        let n = password.count
        if n >= 4 {
            for i in 0..<(n - 3) {
                for j in (i + 3)..<(i + 8) {
                    if j >= n { break }
                    let token = Array(password[i...j])
                    guard token.allSatisfy(\.isASCIIDigit) else { continue }
                    var candidates: [(year: Int, month: Int, day: Int)] = []
                    for (k, l) in Self.dateSplits[token.count]! {
                        if let dmy = Self.mapIntsToDMY([
                            Self.digitsValue(token[0..<k]), Self.digitsValue(token[k..<l]),
                            Self.digitsValue(token[l...]),
                        ]) {
                            candidates.append(dmy)
                        }
                    }
                    guard !candidates.isEmpty else { continue }
                    var best = candidates[0]
                    var minDistance = abs(best.year - ZxcvbnScoring.referenceYear)
                    for c in candidates.dropFirst() {
                        let d = abs(c.year - ZxcvbnScoring.referenceYear)
                        if d < minDistance {
                            best = c
                            minDistance = d
                        }
                    }
                    var m = ZMatch(pattern: .date, i: i, j: j, token: token)
                    m.year = best.year
                    matches.append(m)
                }
            }
        }
        if n >= 6 {
            for i in 0..<(n - 5) {
                for j in (i + 5)..<(i + 10) {
                    if j >= n { break }
                    let token = Array(password[i...j])
                    guard let parts = Self.separatedDate(token),
                        let dmy = Self.mapIntsToDMY([parts.0, parts.2, parts.3])
                    else { continue }
                    var m = ZMatch(pattern: .date, i: i, j: j, token: token)
                    m.year = dmy.year
                    m.separator = String(parts.1)
                    matches.append(m)
                }
            }
        }
        let filtered = matches.enumerated().filter { idx, m in
            !matches.enumerated().contains { o, other in o != idx && other.i <= m.i && other.j >= m.j }
        }.map(\.element)
        return Self.sortByIJ(filtered)
    }

    /// `^(\d{1,4})([\s/\\_.-])(\d{1,2})\2(\d{1,4})$`
    package static func separatedDate(_ t: [Unicode.Scalar]) -> (Int, Unicode.Scalar, Int, Int)? {
        let seps: Set<Unicode.Scalar> = [" ", "\t", "\n", "\r", "\u{0B}", "\u{0C}", "/", "\\", "_", ".", "-"]
        var k = 0
        while k < t.count && t[k].isASCIIDigit { k += 1 }
        guard (1...4).contains(k), k < t.count, seps.contains(t[k]) else { return nil }
        let sep = t[k]
        let a = digitsValue(t[0..<k])
        var m = k + 1
        while m < t.count && t[m].isASCIIDigit { m += 1 }
        guard (1...2).contains(m - k - 1), m < t.count, t[m] == sep else { return nil }
        let b = digitsValue(t[(k + 1)..<m])
        let rest = t[(m + 1)...]
        guard (1...4).contains(rest.count), rest.allSatisfy(\.isASCIIDigit) else { return nil }
        return (a, sep, b, digitsValue(rest))
    }

    package static func mapIntsToDMY(_ ints: [Int]) -> (year: Int, month: Int, day: Int)? {
        if ints[1] > 31 || ints[1] <= 0 { return nil }
        var over12 = 0
        var over31 = 0
        var under1 = 0
        for v in ints {
            if (99 < v && v < 1000) || v > 2050 { return nil }
            if v > 31 { over31 += 1 }
            if v > 12 { over12 += 1 }
            if v <= 0 { under1 += 1 }
        }
        if over31 >= 2 || over12 == 3 || under1 >= 2 { return nil }
        let splits: [(Int, [Int])] = [(ints[2], [ints[0], ints[1]]), (ints[0], [ints[1], ints[2]])]
        for (y, rest) in splits where 1000 <= y && y <= 2050 {
            guard let dm = mapIntsToDM(rest) else { return nil }
            return (y, dm.month, dm.day)
        }
        for (y, rest) in splits {
            if let dm = mapIntsToDM(rest) {
                let year = y > 99 ? y : (y > 50 ? y + 1900 : y + 2000)
                return (year, dm.month, dm.day)
            }
        }
        return nil
    }

    package static func mapIntsToDM(_ ints: [Int]) -> (day: Int, month: Int)? {
        for (d, m) in [(ints[0], ints[1]), (ints[1], ints[0])] where 1 <= d && d <= 31 && 1 <= m && m <= 12 {
            return (d, m)
        }
        return nil
    }
}
