/* The allocator hooks of the libraries (mem.c): installed first thing in main. */
#ifndef H2PARK_MEM_H
#define H2PARK_MEM_H

void mem_install_hooks(void);

#endif
