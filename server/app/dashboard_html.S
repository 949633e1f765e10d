/* Embeds server/app/dashboard.html as dashboard_html and its size (dashboard.c). */
    .section .rodata
    .globl dashboard_html
    .type dashboard_html, @object
dashboard_html:
    .incbin "server/app/dashboard.html"
dashboard_html_end:
    .byte 0
    .size dashboard_html, .-dashboard_html
    .globl dashboard_html_size
    .type dashboard_html_size, @object
    .p2align 2
dashboard_html_size:
    .long dashboard_html_end - dashboard_html
    .section .note.GNU-stack, "", @progbits
