/* Embeds config/default.conf as default_conf_text (NUL-terminated) and its size. */
    .section .rodata
    .globl default_conf_text
    .type default_conf_text, @object
default_conf_text:
    .incbin "config/default.conf"
    .byte 0
    .size default_conf_text, .-default_conf_text
    .globl default_conf_size
    .type default_conf_size, @object
    .p2align 2
default_conf_size:
    .long default_conf_size - default_conf_text - 1
    .section .note.GNU-stack, "", @progbits
