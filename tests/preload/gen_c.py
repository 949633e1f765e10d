# Writes a large C file for the drop-in's gcc test and benchmark: N functions of loops,
# switches, structs and string tables, so that cc1 builds big trees and RTL and the
# optimiser has work.  Usage: python3 gen_c.py N > big.c
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
print("#include <string.h>\nstruct s { int a, b; double c; const char *name; };")
for i in range(n):
    print(f"""static const char *names{i}[] = {{ {", ".join('"n%d_%d"' % (i, k) for k in range(8))} }};
int f{i}(int x, struct s *p, int m)
{{
    int acc = {i};
    for (int k = 0; k < m; k++) {{
        switch ((x + k) % 7) {{
        case 0: acc += p[k].a * {i % 13 + 1}; break;
        case 1: acc ^= p[k].b << {i % 5}; break;
        case 2: acc -= (int)(p[k].c * {i % 3 + 2}.5); break;
        case 3: acc += (int)strlen(names{i}[k % 8]); break;
        case 4: if (p[k].name && p[k].name[0] == 'n') acc++; break;
        default: acc = acc * 31 + k;
        }}
    }}
    return acc + {'f%d(x - 1, p, m / 2)' % (i - 1) if i else '0'};
}}""")
