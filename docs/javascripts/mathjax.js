window.MathJax = {
  tex: {inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true, processEnvironments: true},
  options: {ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex|md-nav__link|md-ellipsis"}
};
document$.subscribe(() => { MathJax.typesetPromise() });
