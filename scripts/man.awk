# man.awk: h2park(8) from docs/operations.md and docs/configuration.md, so the manual and
# the docs are one text.
#
#   awk -v version=0.2.0 -f scripts/man.awk docs/operations.md docs/configuration.md > h2park.8
#
# The manual's sections come in man-pages(7)'s order whatever the order of the pages: the
# operations page's text before its first heading is the DESCRIPTION, its "Synopsis",
# "Options", "Signals", "Environment", "Files", "Exit status", "See also" and "Known
# limitations" sections are SYNOPSIS, OPTIONS, SIGNALS, ENVIRONMENT, FILES, EXIT STATUS,
# SEE ALSO and BUGS, and its other sections are subsections of the DESCRIPTION ("Building"
# aside: it is about the source tree, not the installed daemon).  The configuration page is
# the CONFIGURATION section, its headings subsections.  The Markdown the pages use becomes
# man(7): paragraphs, "- " lists, fenced code, tables (a tagged paragraph per row: the first
# cell as the tag, the others after it, each labelled by its column unless that is the
# meaning), `code`, **bold** and [links] (their text).

function inline(s,    out, i, c, code, bold, t) {
    gsub(/\\\|/, "|", s)
    gsub(/\\/, "\\e", s)
    while (match(s, /\[[^]]*\]\([^)]*\)/)) {       # [text](target) -> text
        t = substr(s, RSTART + 1, RLENGTH)
        sub(/\]\(.*/, "", t)
        s = substr(s, 1, RSTART - 1) t substr(s, RSTART + RLENGTH)
    }
    while (match(s, /<https?:[^>]*>/))              # <url> -> url
        s = substr(s, 1, RSTART - 1) substr(s, RSTART + 1, RLENGTH - 2) substr(s, RSTART + RLENGTH)
    gsub(/\*\*/, "\001", s)
    out = ""; code = 0; bold = 0
    for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "`") { out = out (code ? "\\fR" : "\\fB"); code = !code }
        else if (c == "\001" && !code) { out = out (bold ? "\\fR" : "\\fB"); bold = !bold }
        else if (c == "-" && code) out = out "\\-"
        else out = out c
    }
    if (code || bold) out = out "\\fR"
    return out
}

function req(line) { text[cur] = text[cur] line "\n" }          # a request: .PP, .TP ...
function emit(line) {                                             # text
    if (line ~ /^[.']/) line = "\\&" line
    req(line)
}

function cells(row, arr,    n, i) {
    sub(/^ *\| */, "", row); sub(/ *\| *$/, "", row)
    gsub(/\\\|/, "\002", row)
    n = split(row, arr, / *\| */)
    for (i = 1; i <= n; i++) gsub("\002", "\\|", arr[i])
    return n
}

BEGIN {
    nsec = split("SYNOPSIS DESCRIPTION OPTIONS CONFIGURATION SIGNALS ENVIRONMENT FILES EXIT_STATUS BUGS SEE_ALSO", order, " ")
    named["Synopsis"] = "SYNOPSIS"; named["Options"] = "OPTIONS"; named["Signals"] = "SIGNALS"
    named["Environment"] = "ENVIRONMENT"; named["Files"] = "FILES"; named["Exit status"] = "EXIT_STATUS"
    named["See also"] = "SEE_ALSO"; named["Known limitations"] = "BUGS"
    left_out["Building"] = 1
    fence = 0; para = 0; intable = 0
}

FNR == 1 {
    page = FILENAME; sub(/.*\//, "", page)
    cur = page == "configuration.md" ? "CONFIGURATION" : "DESCRIPTION"
    skip = 0; para = 0; intable = 0
}

/^```/ {
    if (skip) next
    if (!fence) { req(".PP"); req(".RS 4"); req(".nf"); fence = 1 }
    else { req(".fi"); req(".RE"); fence = 0; para = 0 }
    next
}
fence { if (!skip) { gsub(/\\/, "\\e"); emit($0) } next }

/^# / { next }                                   # the page's title
/^#+ / {
    level = index($0, " ") - 1
    title = substr($0, level + 2)
    para = 0; intable = 0
    if (level == 2 && page == "operations.md") {
        skip = (title in left_out)
        if (title in named) { cur = named[title]; next }
        cur = "DESCRIPTION"
    }
    if (!skip) req(".SS " inline(title))
    next
}
skip { next }

/^ *$/ { para = 0; intable = 0; next }

/^\|/ {
    n = cells($0, c)
    if (c[1] ~ /^:?-+:?$/) next
    if (!intable) {                              # the header row names the columns
        intable = 1
        for (i = 1; i <= n; i++) head[i] = c[i]
        next
    }
    req(".TP")
    emit(inline(c[1]))
    rest = ""
    for (i = 2; i <= n; i++) {
        if (c[i] == "") continue
        label = head[i] ~ /^(meaning|what|answer)$/ ? "" : inline(head[i]) ": "
        rest = rest (rest == "" ? "" : "; ") label inline(c[i])
    }
    emit(rest)
    para = 1
    next
}
{ intable = 0 }

/^ *- / {
    sub(/^ *- /, "")
    req(".IP \\(bu 2")
    emit(inline($0))
    para = 1
    next
}

{
    if (!para) { req(".PP"); para = 1 }
    sub(/^ +/, "")
    emit(inline($0))
}

END {
    print ".\\\" Generated from docs/operations.md and docs/configuration.md by scripts/man.awk; edit those."
    print ".TH H2PARK 8 \"\" \"h2park " version "\" \"System Administration\""
    print ".SH NAME"
    print "h2park \\- HTTP/2 and HTTP/1.1 server that parks idle connections"
    for (i = 1; i <= nsec; i++) {
        s = order[i]
        if (!(s in text)) continue
        h = s; gsub(/_/, " ", h)
        print ".SH " h
        printf "%s", text[s]
    }
}
