# man.awk: h2park(8) from README.md, so the manual and the README's reference are one
# text.  It takes the README's "Running h2park" section (its subsections but the request
# API, which is for programmers) and "Operations", and turns the Markdown they use into
# man(7): headings, paragraphs, "- " lists, fenced code, tables (a tagged paragraph per
# row: the first cell as the tag, the others after it), `code`, **bold** and [links].
#
#   awk -v version=0.2.0 -f scripts/man.awk README.md > h2park.8

function inline(s,    out, i, c, code) {
    gsub(/\\/, "\\e", s)
    # [text](target) -> text
    while (match(s, /\[[^]]*\]\([^)]*\)/)) {
        t = substr(s, RSTART + 1, RLENGTH)
        sub(/\]\(.*/, "", t)
        s = substr(s, 1, RSTART - 1) t substr(s, RSTART + RLENGTH)
    }
    gsub(/\*\*/, "\001", s)
    out = ""; code = 0; bold = 0
    for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "`") { out = out (code ? "\\fR" : "\\fB"); code = !code }
        else if (c == "\001") { out = out (bold ? "\\fR" : "\\fB"); bold = !bold }
        else if (c == "-" && code) out = out "\\-"
        else out = out c
    }
    if (code || bold) out = out "\\fR"
    return out
}

function emit(line) {
    if (line ~ /^[.']/) line = "\\&" line
    print line
}

function cells(row, arr,    n, i) {
    sub(/^ *\| */, "", row); sub(/ *\| *$/, "", row)
    gsub(/\\\|/, "\002", row)
    n = split(row, arr, / *\| */)
    for (i = 1; i <= n; i++) gsub("\002", "|", arr[i])
    return n
}

function heading(text, level) {
    if (level <= 2) print ".SH " toupper(inline(text))
    else print ".SS " inline(text)
}

BEGIN {
    print ".\\\" Generated from README.md by scripts/man.awk; edit the README."
    print ".TH H2PARK 8 \"\" \"h2park " version "\" \"System Administration\""
    print ".SH NAME"
    print "h2park \\- HTTP/2 and HTTP/1.1 server that parks idle connections"
    take = 0; fence = 0; para = 0
}

/^```/ {
    if (!take) next
    if (!fence) { print ".PP"; print ".RS 4"; print ".nf"; fence = 1 }
    else { print ".fi"; print ".RE"; fence = 0; para = 0 }
    next
}
fence { gsub(/\\/, "\\e"); emit($0); next }

/^#+ / {
    level = index($0, " ") - 1
    text = substr($0, level + 2)
    if (level <= 2) { take = (text == "Running h2park" || text == "Operations"); skip = 0 }
    else if (level == 3) skip = (text ~ /^The request API/)
    if (take && !skip) { heading(text, level); para = 0; intable = 0 }
    next
}
!take || skip { next }

/^ *$/ { para = 0; intable = 0; next }

/^\|/ {
    n = cells($0, c)
    if (c[1] ~ /^-+:?$/ || c[1] ~ /^:?-+:?$/) next
    if (!intable) {                              # the header row names the columns
        intable = 1
        for (i = 1; i <= n; i++) head[i] = c[i]
        next
    }
    print ".TP"
    emit(inline(c[1]))
    rest = ""
    for (i = 2; i <= n; i++) {
        if (c[i] == "") continue
        label = head[i] ~ /^(meaning|what|answer)$/ ? "" : head[i] ": "
        rest = rest (rest == "" ? "" : "; ") label inline(c[i])
    }
    emit(rest)
    para = 1
    next
}
{ intable = 0 }

/^ *- / {
    sub(/^ *- /, "")
    print ".IP \\(bu 2"
    emit(inline($0))
    para = 1
    next
}

{
    if (!para) { print ".PP"; para = 1 }
    sub(/^ +/, "")
    emit(inline($0))
}
