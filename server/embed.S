/* Files compiled into the binary, each as NAME_text (NUL-terminated, for the odd C
 * string use) and NAME_size, which counts the file's bytes only: not the NUL, not the
 * alignment padding before NAME_size.
 *   default_conf  config/default.conf: what h2park runs on without -c
 *   builtin_page  www/index.html: served at / when the default root is not there
 *   dashboard_html  server/app/dashboard.html: /-/dashboard */
    .macro embed name, file
    .section .rodata
    .globl \name\()_text
    .type \name\()_text, @object
\name\()_text:
    .incbin "\file"
\name\()_end:
    .byte 0
    .size \name\()_text, .-\name\()_text
    .globl \name\()_size
    .type \name\()_size, @object
    .p2align 2
\name\()_size:
    .long \name\()_end - \name\()_text
    .size \name\()_size, 4
    .endm

    embed default_conf, "config/default.conf"
    embed builtin_page, "www/index.html"
    embed dashboard_html, "server/app/dashboard.html"
    .section .note.GNU-stack, "", @progbits
