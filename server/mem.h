/* The allocator hooks of the libraries (mem.c): installed first thing in main. */
#ifndef H2PARK_MEM_H
#define H2PARK_MEM_H

void mem_install_hooks(void);

/* Where in its page every TLS record's plaintext starts in OpenSSL's write buffer. */
#define MEM_TLS_PAYLOAD_PAGE_OFFSET 2048

#endif
