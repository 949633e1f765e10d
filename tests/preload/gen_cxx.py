# Writes a large C++ file for the drop-in's g++ test: N class templates over the standard
# library's containers, strings, lambdas and std::function, each instantiated a few times,
# so that cc1plus builds and frees many trees (templates, overload sets, inlining).
# Usage: python3 gen_cxx.py N > big.cc
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 60
print("""#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>""")
for i in range(n):
    print(f"""
template <typename K, typename V> struct Table{i} {{
    std::map<K, std::vector<V>> by_key;
    std::unordered_map<std::string, std::function<V(const V &)>> ops;
    std::set<std::string> names;
    void add(const K &k, const V &v) {{
        by_key[k].push_back(v);
        names.insert("t{i}_" + std::to_string(by_key.size()));
    }}
    V fold(const K &k) const {{
        auto it = by_key.find(k);
        if (it == by_key.end())
            return V{{}};
        V acc{{}};
        for (const auto &v : it->second)
            acc = acc + v;
        std::vector<V> sorted(it->second);
        std::sort(sorted.begin(), sorted.end(), [](const V &a, const V &b) {{ return b < a; }});
        return sorted.empty() ? acc : acc + sorted.front();
    }}
    std::shared_ptr<Table{i}> clone() const {{ return std::make_shared<Table{i}>(*this); }}
}};
int use{i}(int x) {{
    Table{i}<int, long> a;
    Table{i}<std::string, double> b;
    Table{i}<long, std::string> c;
    for (int k = 0; k < x; k++) {{
        a.add(k % {i + 3}, k * {i + 1}L);
        b.add(std::to_string(k), k * 0.{i + 1});
        c.add(k, std::string({i % 7 + 1}, 'a' + k % 26));
    }}
    a.ops["inc"] = [](const long &v) {{ return v + {i}; }};
    return (int)a.fold(1) + (int)b.fold("2") + (int)c.fold(3).size() + (int)a.clone()->names.size();
}}""")
print("int use_all(int x) {\n    int s = 0;")
for i in range(n):
    print(f"    s += use{i}(x);")
print("    return s;\n}")
