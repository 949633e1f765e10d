# An allocation-heavy perl program for the drop-in's tests and benchmarks: hashes,
# arrays, string building, regular expressions, sort and sprintf, half of it freed as it
# goes.  Prints a digest of what it built.  Usage: perl alloc.pl [SCALE]
use strict;
use warnings;
use Digest::MD5;

my $scale = shift // 1;
my $md5 = Digest::MD5->new;
for my $round (1 .. $scale) {
    my %h;
    $h{"key$_"} = "v" . ("y" x ($_ % 41)) . $_ for 1 .. 150000;
    delete $h{"key$_"} for grep { $_ % 3 == 0 } 1 .. 150000;
    my @a = map { [$_, sprintf("%08x", $_ * 2654435761 % 4294967296), "z" x ($_ % 17)] } 1 .. 80000;
    my @sorted = sort { $a->[1] cmp $b->[1] } @a;
    my $text = join(",", map { $_->[1] } @sorted[0 .. 20000]);
    (my $copy = $text) =~ s/([0-9a-f]{2})([0-9a-f]+)/$2$1/g;
    my $count = () = $copy =~ /ff/g;
    $md5->add(scalar(keys %h), $count, $copy, join("", map { $h{"key$_"} // "" } 1 .. 2000));
}
print "digest ", $md5->hexdigest, "\n";
